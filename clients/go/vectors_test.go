package spillway_test

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	spillway "github.com/spillway-dev/spillway/clients/go"
	spillwayv1 "github.com/spillway-dev/spillway/clients/go/gen/spillway/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// windowVectors is conformance/window-vectors.json, the cross-language parity vectors the
// TypeScript and Python SDKs render too.
type windowVectors struct {
	Caps    map[string]int64 `json:"caps"`
	Vectors []struct {
		Name        string                                `json:"name"`
		Call        string                                `json:"call"`
		Slot        string                                `json:"slot"`
		ContentType string                                `json:"contentType"`
		Payload     map[string]json.RawMessage            `json:"payload"`
		Window      map[string]map[string]json.RawMessage `json:"window"`
		KeepAnsi    bool                                  `json:"keepAnsi"`
		Rendered    string                                `json:"rendered"`
	} `json:"vectors"`
	PreviewVectors []struct {
		Name        string                     `json:"name"`
		Call        string                     `json:"call"`
		ContentType string                     `json:"contentType"`
		Payload     map[string]json.RawMessage `json:"payload"`
		Preview     json.RawMessage            `json:"preview"`
		Head        string                     `json:"head"`
		Tail        string                     `json:"tail"`
		Text        string                     `json:"text"`
	} `json:"previewVectors"`
}

func loadVectors(t *testing.T) windowVectors {
	t.Helper()
	text, err := os.ReadFile(filepath.Join("..", "..", "conformance", "window-vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v windowVectors
	if err := json.Unmarshal(text, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// payloadBytes builds a vector's payload exactly as conformance/payload.ts does.
func payloadBytes(t *testing.T, spec map[string]json.RawMessage) []byte {
	t.Helper()
	str := func(k string) string {
		var s string
		if err := json.Unmarshal(spec[k], &s); err != nil {
			t.Fatalf("payload %s: %v", k, err)
		}
		return s
	}
	num := func(k string) int {
		var n int
		if err := json.Unmarshal(spec[k], &n); err != nil {
			t.Fatalf("payload %s: %v", k, err)
		}
		return n
	}
	switch {
	case spec["text"] != nil:
		return []byte(str("text"))
	case spec["base64"] != nil:
		b, err := base64.StdEncoding.DecodeString(str("base64"))
		if err != nil {
			t.Fatal(err)
		}
		return b
	case spec["hex"] != nil:
		b, err := hex.DecodeString(str("hex"))
		if err != nil {
			t.Fatal(err)
		}
		return b
	case spec["json"] != nil:
		// JSON.stringify of a parsed value is compact; the vectors hold no value it would respell.
		var b bytes.Buffer
		if err := json.Compact(&b, spec["json"]); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	case spec["repeat"] != nil:
		var b strings.Builder
		unit := str("repeat")
		for i := 1; i <= num("count"); i++ {
			b.WriteString(strings.ReplaceAll(unit, "%d", strconv.Itoa(i)))
		}
		return []byte(b.String())
	case spec["byteCycle"] != nil:
		b := make([]byte, num("byteCycle"))
		for i := range b {
			b[i] = byte(i % 256)
		}
		return b
	}
	t.Fatalf("unknown payload spec %v", spec)
	return nil
}

// toolArgs spells a vector's window as the read_tool_output tool's arguments.
func toolArgs(handle string, window map[string]map[string]json.RawMessage) map[string]any {
	names := map[string]string{"fromEnd": "from_end", "ignoreCase": "ignore_case", "maxMatches": "limit", "contextLines": "context", "query": "jsonpath"}
	args := map[string]any{"handle": handle}
	for mode, fields := range window {
		for k, v := range fields {
			if n, ok := names[k]; ok {
				k = n
			}
			args[k] = v
		}
		if mode == "bytes" || mode == "json" {
			args[mode] = true
		}
	}
	return args
}

// TestServerRunsWithTheVectorsCaps: the vectors were rendered with the server's default caps.
func TestServerRunsWithTheVectorsCaps(t *testing.T) {
	info, err := dial(t).ServerInfo(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	caps := info.GetCaps()
	got := map[string]int64{
		"maxWindowLines": int64(caps.GetMaxWindowLines()),
		"maxWindowChars": int64(caps.GetMaxWindowChars()),
		"maxLineChars":   int64(caps.GetMaxLineChars()),
		"maxMatches":     int64(caps.GetMaxMatches()),
	}
	want := loadVectors(t).Caps
	for k, v := range want {
		if got[k] != v {
			t.Errorf("caps %s = %d, the vectors were rendered with %d", k, got[k], v)
		}
	}
}

// TestPreviewVectors offloads every preview vector and compares the record's preview head, tail
// and text byte for byte.
func TestPreviewVectors(t *testing.T) {
	vectors := loadVectors(t)
	c := dial(t)
	for _, v := range vectors.PreviewVectors {
		t.Run(v.Name, func(t *testing.T) {
			opts := &spillway.OffloadOptions{ContentType: v.ContentType}
			if v.Preview != nil {
				var p spillwayv1.PreviewOptions
				if err := protojson.Unmarshal(v.Preview, &p); err != nil {
					t.Fatalf("preview %s: %v", v.Preview, err)
				}
				opts.HeadChars, opts.TailChars, opts.KeepAnsi = p.HeadChars, p.TailChars, p.KeepAnsi
			}
			res, err := c.Offload(testContext(t), spillway.Key{Tenant: "dev", RunID: newRunID(), CallID: v.Call},
				bytes.NewReader(payloadBytes(t, v.Payload)), opts)
			if err != nil {
				t.Fatal(err)
			}
			p := res.Attachment.GetPreview()
			if p.GetHead() != v.Head || p.GetTail() != v.Tail || p.GetText() != v.Text {
				t.Errorf("preview head %q tail %q text %q\nwant head %q tail %q text %q",
					p.GetHead(), p.GetTail(), p.GetText(), v.Head, v.Tail, v.Text)
			}
		})
	}
	if len(vectors.PreviewVectors) == 0 {
		t.Fatal("conformance/window-vectors.json has no preview vectors")
	}
}

// TestWindowVectors renders every vector in conformance/window-vectors.json through
// ReadToolOutput and through the read_tool_output executor, byte for byte, and reports the
// count.
func TestWindowVectors(t *testing.T) {
	vectors := loadVectors(t)
	c := dial(t)
	passed := 0
	for _, v := range vectors.Vectors {
		ok := t.Run(v.Name, func(t *testing.T) {
			ctx := testContext(t)
			runID := newRunID()
			att, err := c.Offload(ctx, spillway.Key{Tenant: "dev", RunID: runID, CallID: v.Call},
				bytes.NewReader(payloadBytes(t, v.Payload)),
				&spillway.OffloadOptions{Slot: v.Slot, ContentType: v.ContentType})
			if err != nil {
				t.Fatal(err)
			}
			handle := att.Attachment.GetHandle()
			req := &spillwayv1.ReadToolOutputRequest{}
			window, err := json.Marshal(v.Window)
			if err != nil {
				t.Fatal(err)
			}
			// The vectors spell the window as the request's proto JSON oneof field.
			if err := protojson.Unmarshal(window, req); err != nil {
				t.Fatalf("window %s: %v", window, err)
			}
			req.RunId, req.Handle, req.KeepAnsi = runID, handle, v.KeepAnsi
			w, err := c.ReadToolOutput(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if w.Rendered != v.Rendered {
				t.Errorf("ReadToolOutput rendered\n%q\nwant\n%q", w.Rendered, v.Rendered)
			}
			args := toolArgs(handle, v.Window)
			if v.KeepAnsi {
				args["keep_ansi"] = true
			}
			text, err := spillway.NewReadToolOutputExecutor(c, runID).Execute(ctx, args)
			if err != nil {
				t.Fatal(err)
			}
			if text != v.Rendered {
				t.Errorf("read_tool_output rendered\n%q\nwant\n%q", text, v.Rendered)
			}
		})
		if ok {
			passed++
		}
	}
	t.Logf("window vectors: %d of %d rendered byte for byte", passed, len(vectors.Vectors))
	fmt.Printf("go window vectors: %d of %d rendered byte for byte\n", passed, len(vectors.Vectors))
	if len(vectors.Vectors) == 0 {
		t.Fatal("conformance/window-vectors.json has no vectors")
	}
}
