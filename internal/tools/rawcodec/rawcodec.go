// Package rawcodec is a gRPC codec that sends a message as the bytes it is
// given and hands back the bytes of the answer: a hand-made client, which
// can send what no generated client encodes (text that is not UTF-8, for
// one). For tests: pass grpc.ForceCodecV2(rawcodec.Codec{}) to a call whose
// request is a []byte and whose reply is a *[]byte.
package rawcodec

import "google.golang.org/grpc/mem"

// Codec implements encoding.CodecV2 on []byte messages.
type Codec struct{}

// Name is the proto codec's: the server decodes what it is sent as
// protobuf.
func (Codec) Name() string { return "proto" }

// Marshal sends v, a []byte, as it is.
func (Codec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.([]byte))}, nil
}

// Unmarshal stores the answer's bytes in v, a *[]byte.
func (Codec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}
