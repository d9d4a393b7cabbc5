package spillway

import (
	"strings"
	"unicode"

	spillwayv1 "github.com/spillway-dev/spillway/clients/go/gen/spillway/v1"
	"google.golang.org/grpc/status"
)

// ErrorReason returns the machine-readable reason (for example `invalid_deferred_handle`) the
// server attached to a status error as a spillway.v1.ErrorInfo detail, or "" when there is
// none.
func ErrorReason(err error) string {
	st, ok := status.FromError(err)
	if !ok {
		return ""
	}
	for _, d := range st.Details() {
		if info, ok := d.(*spillwayv1.ErrorInfo); ok && info.GetReason() != "" {
			return info.GetReason()
		}
	}
	return ""
}

// DescribeError is the one line the `read_tool_output` tool shows the model for a failed
// call, worded as the TypeScript and Python SDKs word it: the ErrorInfo reason, or else the
// snake_case code (`not_found`), then the server's message.
func DescribeError(err error) string {
	st := status.Convert(err)
	message := st.Message()
	if reason := ErrorReason(err); reason != "" {
		// The server's messages for reasoned errors already start with the reason.
		if strings.HasPrefix(message, reason+":") {
			return message
		}
		return reason + ": " + message
	}
	return snakeCase(st.Code().String()) + ": " + message
}

// snakeCase turns a code's name (`DeadlineExceeded`) into `deadline_exceeded`, splitting only
// between a lowercase and an uppercase letter, as the TypeScript SDK does.
func snakeCase(name string) string {
	var b strings.Builder
	prevLower := false
	for _, r := range name {
		if prevLower && unicode.IsUpper(r) {
			b.WriteByte('_')
		}
		prevLower = unicode.IsLower(r)
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}
