package trace

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"iter"
)

// The protobuf wire format as the OpenTelemetry collector's pdata reads it: varints of up to ten
// bytes (bits past the 64th dropped), field numbers above zero, unknown fields and groups skipped.
// Loupe's OTLP decoder (otlp_proto.go) reads requests with these rather than with
// google.golang.org/protobuf/encoding/protowire, which refuses some encodings pdata takes (an
// overlong varint, for one): a request any collector accepts, Loupe accepts.

// wireType is a field's wire type.
type wireType int8

const (
	wireVarint     wireType = 0
	wireI64        wireType = 1
	wireLen        wireType = 2
	wireStartGroup wireType = 3
	wireEndGroup   wireType = 4
	wireI32        wireType = 5
)

// wireRecursionLimit is how deeply attribute values may nest, as pdata counts it: each key-value,
// value, list and map entered is a level.
const wireRecursionLimit = 100

var (
	errWireOverflow   = errors.New("integer overflow")
	errWireLength     = errors.New("negative length")
	errWireDepth      = errors.New("exceeded maximum recursion depth")
	errWireEndOfGroup = errors.New("unexpected end of group")
)

// wireField is one field read from a message: its number and type, and its value.
type wireField struct {
	num  int32
	typ  wireType
	v    uint64 // a varint's, fixed64's or fixed32's value
	data []byte // a length-delimited field's bytes, a view of the message
}

// is reports whether f is field num, checking that it came with the type the schema gives it.
func (f *wireField) is(num int32, typ wireType, name string) (bool, error) {
	if f.num != num {
		return false, nil
	}
	if f.typ != typ {
		return false, fmt.Errorf("wrong wire type %d for field %s", f.typ, name)
	}
	return true, nil
}

// wireNext reads the field at buf[pos:] and returns it with the position after it.
func wireNext(buf []byte, pos int) (wireField, int, error) {
	tag, pos, err := wireVarintAt(buf, pos)
	if err != nil {
		return wireField{}, 0, err
	}
	f := wireField{num: int32(tag >> 3), typ: wireType(tag & 7)}
	if f.num <= 0 {
		return wireField{}, 0, fmt.Errorf("illegal field number %d", f.num)
	}
	switch f.typ {
	case wireVarint:
		f.v, pos, err = wireVarintAt(buf, pos)
	case wireI64:
		if len(buf)-pos < 8 {
			return wireField{}, 0, io.ErrUnexpectedEOF
		}
		f.v, pos = binary.LittleEndian.Uint64(buf[pos:]), pos+8
	case wireI32:
		if len(buf)-pos < 4 {
			return wireField{}, 0, io.ErrUnexpectedEOF
		}
		f.v, pos = uint64(binary.LittleEndian.Uint32(buf[pos:])), pos+4
	case wireLen:
		var n uint64
		if n, pos, err = wireVarintAt(buf, pos); err != nil {
			return wireField{}, 0, err
		}
		if int(n) < 0 {
			return wireField{}, 0, errWireLength
		}
		if int(n) > len(buf)-pos {
			return wireField{}, 0, io.ErrUnexpectedEOF
		}
		f.data, pos = buf[pos:pos+int(n):pos+int(n)], pos+int(n)
	default:
		pos, err = wireSkipGroup(buf, pos, f.typ)
	}
	return f, pos, err
}

// wireFields yields the fields of message b in order, and stops after the first error, which it
// yields with a zero field.
func wireFields(b []byte) iter.Seq2[wireField, error] {
	return func(yield func(wireField, error) bool) {
		for pos := 0; pos < len(b); {
			f, next, err := wireNext(b, pos)
			if err != nil {
				yield(wireField{}, err)
				return
			}
			pos = next
			if !yield(f, nil) {
				return
			}
		}
	}
}

// wireSkipGroup skips a field of a group's wire type (deprecated, and in no OTLP message) as
// pdata's ConsumeUnknown does, which in effect takes only an empty group: it returns after the
// first field inside a group, and the group's end then fails the message.
func wireSkipGroup(buf []byte, pos int, typ wireType) (int, error) {
	depth := 0
	for pos < len(buf) {
		switch typ {
		case wireVarint:
			_, pos, err := wireVarintAt(buf, pos)
			return pos, err
		case wireI64, wireI32:
			size := 8
			if typ == wireI32 {
				size = 4
			}
			if len(buf)-pos < size {
				return 0, io.ErrUnexpectedEOF
			}
			return pos + size, nil
		case wireLen:
			n, pos, err := wireVarintAt(buf, pos)
			if err != nil {
				return 0, err
			}
			if int(n) < 0 {
				return 0, errWireLength
			}
			if int(n) > len(buf)-pos {
				return 0, io.ErrUnexpectedEOF
			}
			return pos + int(n), nil
		case wireStartGroup:
			depth++
		case wireEndGroup:
			if depth == 0 {
				return 0, errWireEndOfGroup
			}
			depth--
		default:
			return 0, fmt.Errorf("illegal wire type %d", typ)
		}
		if depth == 0 {
			return pos, nil
		}
		tag, next, err := wireVarintAt(buf, pos)
		if err != nil {
			return 0, err
		}
		if int32(tag>>3) <= 0 {
			return 0, fmt.Errorf("illegal field number %d", int32(tag>>3))
		}
		typ, pos = wireType(tag&7), next
	}
	return 0, io.ErrUnexpectedEOF
}

// wireVarintAt reads the varint at buf[pos:], as pdata does: up to ten bytes, the bits past the
// 64th dropped.
func wireVarintAt(buf []byte, pos int) (uint64, int, error) {
	var v uint64
	for shift := uint(0); ; shift += 7 {
		if shift >= 64 {
			return 0, 0, errWireOverflow
		}
		if pos >= len(buf) {
			return 0, 0, io.ErrUnexpectedEOF
		}
		b := buf[pos]
		pos++
		v |= uint64(b&0x7F) << shift
		if b < 0x80 {
			return v, pos, nil
		}
	}
}
