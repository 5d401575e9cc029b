package cluster

import (
	"errors"
	"fmt"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// A proto3 string must be UTF-8, and protobuf-go refuses to decode a
// message whose string field is not; gRPC then answers the call Internal
// ("grpc: failed to unmarshal the received message") before any handler
// runs, and no status a codec returns keeps its code. A client that is
// not written in Go may well send such a key: C++ protobuf, Envoy's, logs
// the string and sends it. So the node's server decodes the requests of
// the services that check their strings themselves (Limiter's, and
// Envoy's rate limit service) a second way when protobuf-go refuses one
// for its UTF-8 alone: as if every string field were bytes, which takes
// any bytes, and copied into the real message. The handler then refuses
// the field by name (InvalidArgument), or, for Envoy, counts it. A valid
// message is decoded once, as before; only a refused one costs more.

// AcceptInvalidUTF8 makes the node's server decode requests of the types
// of requests even when a string field is not valid UTF-8 (their strings
// then hold the bytes sent), for a service whose handlers check the
// strings they read themselves and answer a field that is not UTF-8 as
// the caller's error. A service registered through Config.GRPCServices
// calls it with the registrar it is given, before any call; it reports
// false for any other registrar (a grpc.Server of the program's own),
// whose services keep protobuf's check. A service that does not check its
// strings must not call it: its handlers would see strings that
// protobuf-go promises are UTF-8 and are not.
func AcceptInvalidUTF8(r grpc.ServiceRegistrar, requests ...proto.Message) bool {
	reg, ok := r.(*registrar)
	if !ok {
		return false
	}
	reg.lenient.accept(requests...)
	return true
}

// registrar is what Config.GRPCServices are given: the node's server, and
// its codec's lenient decoder for AcceptInvalidUTF8.
type registrar struct {
	*grpc.Server
	lenient *lenientUTF8
	n       *Node
}

// RegisterService registers a service on the node's server, its messages
// refused for their size counted (Node.sizeCounted).
func (r *registrar) RegisterService(desc *grpc.ServiceDesc, impl any) {
	r.Server.RegisterService(r.n.sizeCounted(desc), impl)
}

// lenientUTF8 decodes, for the message types it accepts, a message
// protobuf-go refuses for a string field that is not UTF-8 (see above).
type lenientUTF8 struct {
	mu    sync.Mutex
	types map[protoreflect.FullName]*lenientType
}

// lenientType is one accepted message type: a descriptor of it whose
// string fields are bytes, made the first time one is needed.
type lenientType struct {
	once sync.Once
	desc protoreflect.MessageDescriptor
	err  error
}

func newLenientUTF8() *lenientUTF8 {
	return &lenientUTF8{types: map[protoreflect.FullName]*lenientType{}}
}

// accept adds the types of msgs.
func (l *lenientUTF8) accept(msgs ...proto.Message) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range msgs {
		if name := m.ProtoReflect().Descriptor().FullName(); l.types[name] == nil {
			l.types[name] = &lenientType{}
		}
	}
}

// invalidUTF8 reports whether err is protobuf-go's refusal of a string
// that is not UTF-8.
func invalidUTF8(err error) bool {
	var u interface{ InvalidUTF8() bool }
	return errors.As(err, &u) && u.InvalidUTF8()
}

// unmarshal decodes b into m with its string fields read as bytes, if m's
// type is accepted; ok is false, and m untouched, if it is not. Every
// other rule of the wire format holds as protobuf-go applies it, so that a
// message malformed in another way still fails.
func (l *lenientUTF8) unmarshal(b []byte, m proto.Message) (ok bool, err error) {
	dst := m.ProtoReflect()
	l.mu.Lock()
	t := l.types[dst.Descriptor().FullName()]
	l.mu.Unlock()
	if t == nil {
		return false, nil
	}
	t.once.Do(func() { t.desc, t.err = bytesDescriptor(dst.Descriptor()) })
	if t.err != nil {
		return true, t.err
	}
	src := dynamicpb.NewMessage(t.desc)
	// No resolver: an extension stays unknown bytes, as the copy's
	// descriptor extends nothing the registry knows.
	if err := (proto.UnmarshalOptions{Resolver: new(protoregistry.Types)}).Unmarshal(b, src); err != nil {
		return true, err
	}
	proto.Reset(m)
	copyMessage(dst, src)
	return true, nil
}

// bytesDescriptor returns a descriptor of md whose string fields, and
// those of every message in its files and the files they import, are
// bytes. A map's string keys stay strings, which no map key may be
// otherwise; such a key that is not UTF-8 is still refused.
func bytesDescriptor(md protoreflect.MessageDescriptor) (protoreflect.MessageDescriptor, error) {
	var files []*descriptorpb.FileDescriptorProto
	seen := map[string]bool{}
	var add func(fd protoreflect.FileDescriptor)
	add = func(fd protoreflect.FileDescriptor) {
		if seen[fd.Path()] {
			return
		}
		seen[fd.Path()] = true
		imports := fd.Imports()
		for i := range imports.Len() {
			add(imports.Get(i).FileDescriptor)
		}
		p := protodesc.ToFileDescriptorProto(fd)
		for _, m := range p.GetMessageType() {
			stringsToBytes(m)
		}
		files = append(files, p)
	}
	add(md.ParentFile())
	reg, err := protodesc.NewFiles(&descriptorpb.FileDescriptorSet{File: files})
	if err != nil {
		return nil, fmt.Errorf("sluice: a descriptor of %s with bytes for strings: %w", md.FullName(), err)
	}
	d, err := reg.FindDescriptorByName(md.FullName())
	if err != nil {
		return nil, fmt.Errorf("sluice: a descriptor of %s with bytes for strings: %w", md.FullName(), err)
	}
	out, ok := d.(protoreflect.MessageDescriptor)
	if !ok {
		return nil, fmt.Errorf("sluice: %s is not a message", md.FullName())
	}
	return out, nil
}

// stringsToBytes makes m's string fields, and its nested messages', bytes,
// but for a map entry's key.
func stringsToBytes(m *descriptorpb.DescriptorProto) {
	mapEntry := m.GetOptions().GetMapEntry()
	for _, f := range m.GetField() {
		if f.GetType() == descriptorpb.FieldDescriptorProto_TYPE_STRING && !(mapEntry && f.GetNumber() == 1) {
			f.Type = descriptorpb.FieldDescriptorProto_TYPE_BYTES.Enum()
		}
	}
	for _, n := range m.GetNestedType() {
		stringsToBytes(n)
	}
}

// copyMessage sets every field of src, a message of a descriptor made by
// bytesDescriptor, in dst, a message of the type it was made from, with
// bytes back into strings, and appends src's unknown fields to dst's.
func copyMessage(dst, src protoreflect.Message) {
	fields := dst.Descriptor().Fields()
	src.Range(func(sf protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		f := fields.ByNumber(sf.Number())
		switch {
		case f == nil:
			// Not in dst's descriptor: cannot be, as the two have the
			// same fields.
		case f.IsList():
			to, from := dst.Mutable(f).List(), v.List()
			for i := range from.Len() {
				to.Append(copyValue(f, to.NewElement, from.Get(i)))
			}
		case f.IsMap():
			to, vf := dst.Mutable(f).Map(), f.MapValue()
			v.Map().Range(func(k protoreflect.MapKey, e protoreflect.Value) bool {
				to.Set(k, copyValue(vf, to.NewValue, e))
				return true
			})
		case f.Message() != nil:
			copyMessage(dst.Mutable(f).Message(), v.Message())
		default:
			dst.Set(f, copyValue(f, nil, v))
		}
		return true
	})
	if u := src.GetUnknown(); len(u) > 0 {
		dst.SetUnknown(append(dst.GetUnknown(), u...))
	}
}

// copyValue is v, a list element, map value or singular scalar of src,
// for field f of dst: a message copied into a new one from newMessage, the
// bytes of a string as a string, any other scalar as it is.
func copyValue(f protoreflect.FieldDescriptor, newMessage func() protoreflect.Value, v protoreflect.Value) protoreflect.Value {
	switch {
	case f.Message() != nil:
		m := newMessage()
		copyMessage(m.Message(), v.Message())
		return m
	case f.Kind() == protoreflect.StringKind:
		return protoreflect.ValueOfString(string(v.Bytes()))
	}
	return v
}
