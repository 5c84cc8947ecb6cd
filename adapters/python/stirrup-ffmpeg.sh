#!/bin/sh
# stirrup-ffmpeg.sh: the ffmpeg imageio-ffmpeg's wheel bundles (a glibc
# build: moviepy runs it at `import stirrup`), started through the runtime
# tree's own glibc loader and libraries, so it runs in an image without
# glibc (alpine-class) as in any other; the tree carries trixie's glibc
# for its CPython. Installed at share/sandproof/ffmpeg; the launch points
# IMAGEIO_FFMPEG_EXE here. Nothing goes into the environment: what ffmpeg
# starts uses the image's own libc.
case $0 in */*) d=${0%/*} ;; *) d=. ;; esac
case $d in /*) ;; *) d=$PWD/$d ;; esac
py=$d/../../python/usr
case $(uname -m) in
  x86_64) l=$py/lib/x86_64-linux-gnu ld=ld-linux-x86-64.so.2 ;;
  aarch64) l=$py/lib/aarch64-linux-gnu ld=ld-linux-aarch64.so.1 ;;
  *) echo "stirrup-ffmpeg: no loader for $(uname -m)" >&2; exit 127 ;;
esac
for f in "$py"/lib/python3/dist-packages/imageio_ffmpeg/binaries/ffmpeg-linux-*; do
  exec "$l/$ld" --inhibit-cache --library-path "$l" "$f" "$@"
done
echo "stirrup-ffmpeg: imageio_ffmpeg's binary not found" >&2
exit 127
