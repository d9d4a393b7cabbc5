package spillway_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	spillway "github.com/spillway-dev/spillway/clients/go"
)

// TestToolArgsVectors: every vector in conformance/tool-args-vectors.json gets, from the Go
// model tool, exactly the `error: ` line the TypeScript and Python SDKs give, before any call to
// the service.
func TestToolArgsVectors(t *testing.T) {
	text, err := os.ReadFile(filepath.Join("..", "..", "conformance", "tool-args-vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Vectors []struct {
			Name  string `json:"name"`
			Args  string `json:"args"`
			Error string `json:"error"`
		} `json:"vectors"`
	}
	if err := json.Unmarshal(text, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Vectors) <= 20 {
		t.Fatalf("conformance/tool-args-vectors.json has %d vectors", len(file.Vectors))
	}
	// The executor reads through the test server, so arguments it wrongly accepted would not
	// answer the vector's error line.
	e := spillway.NewReadToolOutputExecutor(dial(t), newRunID())
	for _, v := range file.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			got, err := e.Execute(testContext(t), v.Args)
			if err != nil {
				t.Fatal(err)
			}
			if got != "error: "+v.Error {
				t.Fatalf("args %s: got %q, want %q", v.Args, got, "error: "+v.Error)
			}
		})
	}
}
