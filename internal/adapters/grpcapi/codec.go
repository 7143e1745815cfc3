package grpcapi

import (
	"errors"
	"fmt"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	protoenc "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// Codec is the server option that decodes requests with text that is not
// UTF-8 instead of refusing them.
//
// Why: a string that is not UTF-8 is the caller's mistake, and the caller
// is owed INVALID_ARGUMENT naming the field, as for any other bad field.
// But the protobuf runtime refuses such a string while it decodes, and
// gRPC answers every decoding failure INTERNAL, before authentication or
// any handler runs. So when a request fails to decode, the codec decodes
// it once more with the string fields of its message's file read as bytes,
// and hands the handler what the caller sent, invalid text included. The
// caller is then checked first, and the handler's own field checks
// (customer ids, SKUs and notes must be UTF-8; ids, amounts and months must
// parse) refuse the field. A message that fails for any other reason (or
// whose invalid text is in a message of another file) keeps gRPC's answer.
// Responses are encoded as before, and a valid request is decoded once.
func Codec() grpc.ServerOption { return grpc.ForceServerCodecV2(newCodec()) }

func newCodec() codec { return codec{strict: encoding.GetCodecV2(protoenc.Name)} }

type codec struct{ strict encoding.CodecV2 }

func (c codec) Name() string                           { return c.strict.Name() }
func (c codec) Marshal(v any) (mem.BufferSlice, error) { return c.strict.Marshal(v) }

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	err := c.strict.Unmarshal(data, v)
	m, ok := v.(proto.Message)
	if err == nil || !ok {
		return err
	}
	if decodeKeepingText(data.Materialize(), m) != nil {
		return err
	}
	return nil
}

// decodeKeepingText decodes b into m as proto.Unmarshal does, except that
// a string field of m's file holds whatever bytes b gives it.
func decodeKeepingText(b []byte, m proto.Message) error {
	lenient, err := textAsBytes(m.ProtoReflect().Descriptor())
	if err != nil {
		return err
	}
	raw := dynamicpb.NewMessage(lenient)
	if err := proto.Unmarshal(b, raw); err != nil {
		return err
	}
	proto.Reset(m)
	return copyFields(m.ProtoReflect(), raw)
}

type lenientType struct {
	md  protoreflect.MessageDescriptor
	err error
}

// lenientTypes caches textAsBytes by message name.
var lenientTypes sync.Map

// textAsBytes is md with every string field of its file declared bytes
// (whose decoding checks nothing), built once per message.
func textAsBytes(md protoreflect.MessageDescriptor) (protoreflect.MessageDescriptor, error) {
	t, ok := lenientTypes.Load(md.FullName())
	if !ok {
		var l lenientType
		l.md, l.err = buildTextAsBytes(md)
		t, _ = lenientTypes.LoadOrStore(md.FullName(), l)
	}
	return t.(lenientType).md, t.(lenientType).err
}

func buildTextAsBytes(md protoreflect.MessageDescriptor) (protoreflect.MessageDescriptor, error) {
	fdp := protodesc.ToFileDescriptorProto(md.ParentFile())
	for _, m := range fdp.GetMessageType() {
		stringsToBytes(m)
	}
	// A string map key cannot become bytes: such a file fails here and
	// keeps gRPC's answer.
	fd, err := protodesc.NewFile(fdp, protoregistry.GlobalFiles)
	if err != nil {
		return nil, err
	}
	files := new(protoregistry.Files)
	if err := files.RegisterFile(fd); err != nil {
		return nil, err
	}
	d, err := files.FindDescriptorByName(md.FullName())
	if err != nil {
		return nil, err
	}
	lenient, ok := d.(protoreflect.MessageDescriptor)
	if !ok {
		return nil, fmt.Errorf("%s is not a message", md.FullName())
	}
	return lenient, nil
}

func stringsToBytes(m *descriptorpb.DescriptorProto) {
	for _, f := range m.GetField() {
		if f.GetType() == descriptorpb.FieldDescriptorProto_TYPE_STRING {
			f.Type = descriptorpb.FieldDescriptorProto_TYPE_BYTES.Enum()
		}
	}
	for _, n := range m.GetNestedType() {
		stringsToBytes(n)
	}
}

// copyFields sets in dst every field src holds, with the same numbers;
// bytes become strings where dst declares a string.
func copyFields(dst, src protoreflect.Message) error {
	var err error
	src.Range(func(sf protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		df := dst.Descriptor().Fields().ByNumber(sf.Number())
		switch {
		case sf.IsMap():
			err = errors.New("maps are not copied")
		case sf.IsList():
			dl, sl := dst.Mutable(df).List(), v.List()
			for i := range sl.Len() {
				var e protoreflect.Value
				if e, err = convert(df, sf, sl.Get(i), dl.NewElement); err != nil {
					break
				}
				dl.Append(e)
			}
		default:
			var e protoreflect.Value
			if e, err = convert(df, sf, v, func() protoreflect.Value { return dst.NewField(df) }); err == nil {
				dst.Set(df, e)
			}
		}
		return err == nil
	})
	dst.SetUnknown(src.GetUnknown())
	return err
}

// convert is v, a value of src's field sf, as a value of dst's field df;
// fresh makes an empty message of df's type.
func convert(df, sf protoreflect.FieldDescriptor, v protoreflect.Value, fresh func() protoreflect.Value) (protoreflect.Value, error) {
	switch {
	case df.Kind() == protoreflect.StringKind && sf.Kind() == protoreflect.BytesKind:
		return protoreflect.ValueOfString(string(v.Bytes())), nil
	case df.Message() != nil:
		m := fresh()
		return m, copyFields(m.Message(), v.Message())
	}
	return v, nil
}
