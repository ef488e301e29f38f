package vendors

import (
	"encoding/json"
	"errors"

	gojson "github.com/goccy/go-json"
)

// unmarshal decodes every vendor line and the nested values the parsers
// decode themselves. goccy/go-json decodes the same documents into the
// same values as encoding/json at about a quarter of the CPU (a vendor
// line is parsed for every line a CLI prints, docs/benchmarks.md);
// FuzzDecoderAgreesWithEncodingJSON holds it to encoding/json's results.
// A variable so that test can run the parsers on encoding/json too.
var unmarshal = gojson.Unmarshal

// isTypeError reports a JSON value of the wrong type for its field, from
// either decoder: the line is valid JSON, so what decoded around the
// mismatch is kept.
func isTypeError(err error) bool {
	var std *json.UnmarshalTypeError
	var fast *gojson.UnmarshalTypeError
	return errors.As(err, &std) || errors.As(err, &fast)
}
