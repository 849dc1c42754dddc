package backup

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
)

// Header is what the start of an RDB file says about the dataset.
type Header struct {
	// RDBVersion is the file format version (e.g. 10 for Redis 7.0).
	RDBVersion int
	// RedisVersion that wrote the file (aux field redis-ver).
	RedisVersion string
	// ReplicationOffset of the writer (aux field repl-offset), when it
	// recorded one.
	ReplicationOffset int64
	// DB is the first database in the file; Keys and ExpiringKeys are its
	// sizes (the RESIZEDB record). Databases after the first are not
	// counted.
	DB           int64
	Keys         int64
	ExpiringKeys int64
}

// RDB opcodes, from Redis' rdb.h.
const (
	opFunction2    = 0xF5
	opFunction     = 0xF6
	opModuleAux    = 0xF7
	opIdle         = 0xF8
	opFreq         = 0xF9
	opAux          = 0xFA
	opResizeDB     = 0xFB
	opExpireTimeMS = 0xFC
	opExpireTime   = 0xFD
	opSelectDB     = 0xFE
	opEOF          = 0xFF
)

var errShort = errors.New("rdb: header continues past the bytes seen")

// ParseHeader reads the header of an RDB file: the magic, the aux fields and
// the size of the first database. b may be a prefix of the file; errShort
// means it was too short.
func ParseHeader(b []byte) (Header, error) {
	var h Header
	if len(b) < 9 {
		return h, errShort
	}
	if string(b[:5]) != "REDIS" {
		return h, fmt.Errorf("rdb: not an RDB file (starts with %q)", b[:min(len(b), 9)])
	}
	v, err := strconv.Atoi(string(b[5:9]))
	if err != nil {
		return h, fmt.Errorf("rdb: bad version %q", b[5:9])
	}
	h.RDBVersion = v
	p := &parser{b: b, i: 9}
	for {
		op, err := p.byte()
		if err != nil {
			return h, err
		}
		switch op {
		case opAux:
			k, err := p.str()
			if err != nil {
				return h, err
			}
			val, err := p.str()
			if err != nil {
				return h, err
			}
			switch k {
			case "redis-ver":
				h.RedisVersion = val
			case "repl-offset":
				h.ReplicationOffset, _ = strconv.ParseInt(val, 10, 64)
			}
		case opSelectDB:
			db, _, err := p.length()
			if err != nil {
				return h, err
			}
			h.DB = int64(db)
		case opResizeDB:
			keys, _, err := p.length()
			if err != nil {
				return h, err
			}
			exp, _, err := p.length()
			if err != nil {
				return h, err
			}
			h.Keys, h.ExpiringKeys = int64(keys), int64(exp)
			return h, nil
		case opEOF:
			return h, nil // an empty dataset
		case opFunction2:
			if _, err := p.str(); err != nil {
				return h, err
			}
		case opModuleAux, opFunction, opIdle, opFreq, opExpireTime, opExpireTimeMS:
			return h, fmt.Errorf("rdb: opcode 0x%X before the first database's size is not supported", op)
		default:
			// A key before any RESIZEDB (very old writers): sizes unknown.
			return h, fmt.Errorf("rdb: no database size record (opcode 0x%X)", op)
		}
	}
}

type parser struct {
	b []byte
	i int
}

func (p *parser) byte() (byte, error) {
	if p.i >= len(p.b) {
		return 0, errShort
	}
	c := p.b[p.i]
	p.i++
	return c, nil
}

func (p *parser) take(n int) ([]byte, error) {
	if n < 0 || p.i+n > len(p.b) {
		return nil, errShort
	}
	out := p.b[p.i : p.i+n]
	p.i += n
	return out, nil
}

// length reads a length; encoded is true for the special string encodings
// (then the value is the encoding type).
func (p *parser) length() (uint64, bool, error) {
	c, err := p.byte()
	if err != nil {
		return 0, false, err
	}
	switch c >> 6 {
	case 0:
		return uint64(c & 0x3F), false, nil
	case 1:
		d, err := p.byte()
		if err != nil {
			return 0, false, err
		}
		return uint64(c&0x3F)<<8 | uint64(d), false, nil
	case 2:
		switch c {
		case 0x80:
			b, err := p.take(4)
			if err != nil {
				return 0, false, err
			}
			return uint64(binary.BigEndian.Uint32(b)), false, nil
		case 0x81:
			b, err := p.take(8)
			if err != nil {
				return 0, false, err
			}
			return binary.BigEndian.Uint64(b), false, nil
		}
		return 0, false, fmt.Errorf("rdb: bad length byte 0x%X", c)
	default:
		return uint64(c & 0x3F), true, nil
	}
}

// str reads a string: raw, integer-encoded or LZF-compressed.
func (p *parser) str() (string, error) {
	n, encoded, err := p.length()
	if err != nil {
		return "", err
	}
	if !encoded {
		b, err := p.take(int(n))
		return string(b), err
	}
	switch n {
	case 0:
		b, err := p.take(1)
		if err != nil {
			return "", err
		}
		return strconv.Itoa(int(int8(b[0]))), nil
	case 1:
		b, err := p.take(2)
		if err != nil {
			return "", err
		}
		return strconv.Itoa(int(int16(binary.LittleEndian.Uint16(b)))), nil
	case 2:
		b, err := p.take(4)
		if err != nil {
			return "", err
		}
		return strconv.Itoa(int(int32(binary.LittleEndian.Uint32(b)))), nil
	case 3:
		clen, _, err := p.length()
		if err != nil {
			return "", err
		}
		ulen, _, err := p.length()
		if err != nil {
			return "", err
		}
		if ulen > 1<<20 {
			return "", fmt.Errorf("rdb: compressed header string of %d bytes", ulen)
		}
		c, err := p.take(int(clen))
		if err != nil {
			return "", err
		}
		out, err := lzfDecompress(c, int(ulen))
		return string(out), err
	}
	return "", fmt.Errorf("rdb: unknown string encoding %d", n)
}

// lzfDecompress undoes Redis' LZF compression.
func lzfDecompress(in []byte, outLen int) ([]byte, error) {
	out := make([]byte, 0, outLen)
	for i := 0; i < len(in); {
		ctrl := int(in[i])
		i++
		if ctrl < 32 { // a literal run of ctrl+1 bytes
			n := ctrl + 1
			if i+n > len(in) {
				return nil, errors.New("rdb: truncated LZF literal")
			}
			out = append(out, in[i:i+n]...)
			i += n
			continue
		}
		n := ctrl >> 5
		if n == 7 {
			if i >= len(in) {
				return nil, errors.New("rdb: truncated LZF back reference")
			}
			n += int(in[i])
			i++
		}
		if i >= len(in) {
			return nil, errors.New("rdb: truncated LZF back reference")
		}
		ref := len(out) - ((ctrl & 0x1F) << 8) - int(in[i]) - 1
		i++
		if ref < 0 {
			return nil, errors.New("rdb: bad LZF back reference")
		}
		for j := 0; j < n+2; j++ {
			out = append(out, out[ref+j])
		}
	}
	if len(out) != outLen {
		return nil, fmt.Errorf("rdb: LZF gave %d bytes, want %d", len(out), outLen)
	}
	return out, nil
}
