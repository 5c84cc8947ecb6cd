package glibc

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"runtime"
)

// tinyELF is a small ELF shared object written field by field, so a test
// can set any header of it: a PT_INTERP, a dynamic section naming needed
// in its string table, and pad zero bytes a test may point a table at.
// The file is: the ELF header, the program headers, the interpreter, the
// string table, the dynamic section, the padding, the section headers
// (null, .dynamic, .dynstr).
type tinyELF struct {
	class elf.Class
	bo    binary.ByteOrder
	h     elf.Header64 // written in the class's layout
	progs []elf.Prog64
	secs  []elf.Section64
	dyns  []elf.Dyn64
	body  []byte // from the end of the program headers to the section headers
	dynAt uint64 // where the dynamic entries are written in body
	pad   uint64 // where the padding starts in the file
	size  uint64 // the file's size as laid out
}

func hostMachine() elf.Machine {
	if runtime.GOARCH == "arm64" {
		return elf.EM_AARCH64
	}
	return elf.EM_X86_64
}

// newTinyELF lays out a 64-bit little-endian file of the host's machine.
func newTinyELF(interp string, needed []string, pad int) *tinyELF {
	return newTinyELFOf(elf.ELFCLASS64, binary.LittleEndian, hostMachine(), interp, needed, pad)
}

func (t *tinyELF) sizes() (eh, ph, sh, dyn uint64) {
	if t.class == elf.ELFCLASS32 {
		return 52, 32, 40, 8
	}
	return 64, 56, 64, 16
}

func newTinyELFOf(class elf.Class, bo binary.ByteOrder, m elf.Machine, interp string, needed []string, pad int) *tinyELF {
	t := &tinyELF{class: class, bo: bo}
	eh, ph, sh, dynEnt := t.sizes()
	if interp != "" {
		t.progs = []elf.Prog64{{Type: uint32(elf.PT_INTERP), Flags: uint32(elf.PF_R)}}
	}
	start := eh + ph*uint64(len(t.progs))
	var body bytes.Buffer
	if interp != "" {
		t.progs[0].Off, t.progs[0].Filesz = start, uint64(len(interp)+1)
		body.WriteString(interp + "\x00")
	}
	strOff := start + uint64(body.Len())
	body.WriteByte(0)
	for _, n := range needed {
		t.dyns = append(t.dyns, elf.Dyn64{Tag: int64(elf.DT_NEEDED), Val: uint64(body.Len()) - (strOff - start)})
		body.WriteString(n + "\x00")
	}
	strSize := start + uint64(body.Len()) - strOff
	t.dyns = append(t.dyns, elf.Dyn64{Tag: int64(elf.DT_NULL)})
	for body.Len()%8 != 0 {
		body.WriteByte(0)
	}
	dynOff := start + uint64(body.Len())
	t.dynAt = uint64(body.Len())
	body.Write(make([]byte, dynEnt*uint64(len(t.dyns)))) // written by bytes()
	t.pad = start + uint64(body.Len())
	body.Write(make([]byte, pad))
	t.body = body.Bytes()
	shoff := start + uint64(len(t.body))
	t.secs = []elf.Section64{{},
		{Type: uint32(elf.SHT_DYNAMIC), Flags: uint64(elf.SHF_ALLOC), Off: dynOff, Size: dynEnt * uint64(len(t.dyns)), Link: 2, Entsize: dynEnt},
		{Type: uint32(elf.SHT_STRTAB), Flags: uint64(elf.SHF_ALLOC), Off: strOff, Size: strSize},
	}
	t.h = elf.Header64{Type: uint16(elf.ET_DYN), Machine: uint16(m), Version: uint32(elf.EV_CURRENT),
		Phoff: eh, Shoff: shoff, Ehsize: uint16(eh), Phentsize: uint16(ph), Phnum: uint16(len(t.progs)),
		Shentsize: uint16(sh), Shnum: uint16(len(t.secs)), Shstrndx: 0}
	if len(t.progs) == 0 {
		t.h.Phoff = 0
	}
	t.size = shoff + sh*uint64(len(t.secs))
	return t
}

// bytes writes the file as its fields say now; tables stay where they
// were laid out (a test points a header elsewhere by its offset).
func (t *tinyELF) bytes() []byte {
	var out bytes.Buffer
	h := t.h
	copy(h.Ident[:], elf.ELFMAG)
	h.Ident[elf.EI_CLASS], h.Ident[elf.EI_VERSION] = byte(t.class), byte(elf.EV_CURRENT)
	h.Ident[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	if t.bo == binary.BigEndian {
		h.Ident[elf.EI_DATA] = byte(elf.ELFDATA2MSB)
	}
	body := bytes.Clone(t.body)
	var dyn bytes.Buffer
	if t.class == elf.ELFCLASS32 {
		binary.Write(&out, t.bo, elf.Header32{Ident: h.Ident, Type: h.Type, Machine: h.Machine, Version: h.Version,
			Phoff: uint32(h.Phoff), Shoff: uint32(h.Shoff), Ehsize: h.Ehsize, Phentsize: h.Phentsize, Phnum: h.Phnum,
			Shentsize: h.Shentsize, Shnum: h.Shnum, Shstrndx: h.Shstrndx})
		for _, p := range t.progs {
			binary.Write(&out, t.bo, elf.Prog32{Type: p.Type, Flags: p.Flags, Off: uint32(p.Off), Filesz: uint32(p.Filesz), Memsz: uint32(p.Filesz)})
		}
		for _, d := range t.dyns {
			binary.Write(&dyn, t.bo, elf.Dyn32{Tag: int32(d.Tag), Val: uint32(d.Val)})
		}
	} else {
		binary.Write(&out, t.bo, h)
		for _, p := range t.progs {
			p.Memsz = p.Filesz
			binary.Write(&out, t.bo, p)
		}
		binary.Write(&dyn, t.bo, t.dyns)
	}
	copy(body[t.dynAt:], dyn.Bytes())
	out.Write(body)
	for _, s := range t.secs {
		if t.class == elf.ELFCLASS32 {
			binary.Write(&out, t.bo, elf.Section32{Name: s.Name, Type: s.Type, Flags: uint32(s.Flags), Off: uint32(s.Off), Size: uint32(s.Size), Link: s.Link, Entsize: uint32(s.Entsize)})
		} else {
			binary.Write(&out, t.bo, s)
		}
	}
	return out.Bytes()
}
