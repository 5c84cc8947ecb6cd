package reports

import (
	"encoding/json"
	"fmt"
	"io"
)

// WriteJSON renders rep as the JSON result tree (schema sandproof.report/v1),
// each case carrying its full evidence record.
func WriteJSON(w io.Writer, rep *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	// Details quote shell output; "<" as \u003c would only hurt reading.
	enc.SetEscapeHTML(false)
	if err := enc.Encode(rep); err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	return nil
}
