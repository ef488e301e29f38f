package metalist

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// protobufPrefix starts every protobuf body of the API server: the
// message after it is a runtime.Unknown wrapping the object
// (k8s.io/apimachinery/pkg/runtime/serializer/protobuf).
var protobufPrefix = []byte{0x6b, 0x38, 0x73, 0x00}

// Field numbers of the messages a protobuf metadata LIST is made of
// (k8s.io/apimachinery's generated.proto files).
const (
	unknownTypeMeta = 1 // runtime.Unknown
	unknownRaw      = 2
	typeMetaKind    = 2 // runtime.TypeMeta
	listMeta        = 1 // PartialObjectMetadataList
	listItems       = 2
	listMetaRV      = 2 // ListMeta
	listMetaCont    = 3
	itemMeta        = 1 // PartialObjectMetadata
	metaName        = 1 // ObjectMeta
	metaNamespace   = 3
	metaRV          = 6
)

// decodeProtoPage reads b, a runtime.Unknown holding a
// PartialObjectMetadataList, into out: the list's kind, version and
// continue token, and each item's namespace, name and resourceVersion.
// Every other field is skipped by its length, unread.
func decodeProtoPage(b []byte, out *page) error {
	var raw []byte
	err := eachField(b, func(num protowire.Number, v []byte) error {
		switch num {
		case unknownTypeMeta:
			return eachField(v, func(num protowire.Number, v []byte) error {
				if num == typeMetaKind {
					out.Kind = string(v)
				}
				return nil
			})
		case unknownRaw:
			raw = v
		}
		return nil
	})
	if err != nil {
		return err
	}
	return eachField(raw, func(num protowire.Number, v []byte) error {
		switch num {
		case listMeta:
			return eachField(v, func(num protowire.Number, v []byte) error {
				switch num {
				case listMetaRV:
					out.Metadata.ResourceVersion = string(v)
				case listMetaCont:
					out.Metadata.Continue = string(v)
				}
				return nil
			})
		case listItems:
			var m Item
			err := eachField(v, func(num protowire.Number, v []byte) error {
				if num != itemMeta {
					return nil
				}
				return eachField(v, func(num protowire.Number, v []byte) error {
					switch num {
					case metaName:
						m.Name = string(v)
					case metaNamespace:
						m.Namespace = string(v)
					case metaRV:
						m.ResourceVersion = string(v)
					}
					return nil
				})
			})
			out.Items = append(out.Items, listedItem{Metadata: m})
			return err
		}
		return nil
	})
}

// errProtobuf says a protobuf message ended inside a field.
var errProtobuf = errors.New("malformed protobuf")

// eachField calls fn with the number and contents of each length-delimited
// field of the message b (strings, bytes, messages), and skips the others.
func eachField(b []byte, fn func(num protowire.Number, v []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: %w", errProtobuf, protowire.ParseError(n))
		}
		b = b[n:]
		if typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return fmt.Errorf("%w: %w", errProtobuf, protowire.ParseError(n))
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return fmt.Errorf("%w: %w", errProtobuf, protowire.ParseError(n))
		}
		b = b[n:]
		if err := fn(num, v); err != nil {
			return err
		}
	}
	return nil
}
