#!/usr/bin/env bash
# A small static FFmpeg with NVDEC, for the GPU machine (issue 20), which has no FFmpeg of its
# own. Built here, reproducibly, from Debian's source package of the FFmpeg framepipe links
# against (5.1, with Debian's patches) and NVIDIA's codec headers (libffmpeg-nvenc-dev):
#
#   scripts/ffmpeg-nvdec.sh           build into target/ffmpeg-nvdec/ (skipped when built)
#
# What it holds: static libavcodec, libavformat, libavutil, libswscale, libswresample and
# libavfilter with pkg-config files (framepipe links them with `--features ffmpeg-static`,
# so the binary sent over carries them), and bin/ffmpeg, the yardstick there (`-hwaccel
# cuda`, which the wheel's static ffmpeg lacks). Only what framepipe reads: the mov,
# matroska and avi demuxers, H.264, HEVC, MPEG-4, VP9, Motion JPEG and FFV1 decoders, NVDEC
# for H.264 and HEVC (CUDA's and NVDEC's libraries are loaded at run time, from the
# driver), files and pipes. Nothing found on this machine is linked (--disable-autodetect).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
prefix=$root/target/ffmpeg-nvdec
version=5.1
if [ -x "$prefix/bin/ffmpeg" ] && [ -f "$prefix/lib/libavcodec.a" ]; then
    echo "$prefix: built"
    exit 0
fi
# The assembler of FFmpeg's SIMD code (decoding on the CPU at full speed), and what the
# project's builds need anyway.
. scripts/setup.sh
setup_packages nasm xz-utils patch
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

# Debian's source package, through a private source list (the system's is left alone).
mkdir -p parts lists/partial
cat >parts/src.sources <<'EOF'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
apt=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$work/parts" -o "Dir::State::Lists=$work/lists")
apt-get "${apt[@]}" -qq update
apt-get "${apt[@]}" -qq source --download-only "ffmpeg=${version}*" 2>/dev/null ||
    apt-get "${apt[@]}" -qq source --download-only ffmpeg
apt-get -qq download libffmpeg-nvenc-dev
tar xf ffmpeg_*.orig.tar.xz
tar xf ffmpeg_*.debian.tar.xz
src=$(ls -d ffmpeg-*/)
(cd "$src" && while read -r p; do
    case "$p" in '' | '#'*) ;; *) patch -s -p1 <"../debian/patches/$p" ;; esac
done <../debian/patches/series)
dpkg -x libffmpeg-nvenc-dev_*.deb nv
# The headers' pkg-config file names /usr: point it at the unpacked copy.
mkdir -p pc
sed "s|^prefix=.*|prefix=$work/nv/usr|" nv/usr/share/pkgconfig/ffnvcodec.pc >pc/ffnvcodec.pc

cd "$src"
PKG_CONFIG_PATH=$work/pc ./configure \
    --prefix="$prefix" --enable-static --disable-shared --enable-pic \
    --disable-doc --disable-debug --disable-autodetect --disable-everything \
    --disable-avdevice --disable-postproc --disable-ffplay --disable-ffprobe \
    --enable-ffnvcodec --enable-nvdec \
    --enable-protocol=file,pipe \
    --enable-demuxer=mov,matroska,avi,h264,hevc,yuv4mpegpipe,ivf \
    --enable-decoder=h264,hevc,mpeg4,vp9,mjpeg,ffv1,rawvideo \
    --enable-parser=h264,hevc,mpeg4video,vp9,mjpeg \
    --enable-hwaccel=h264_nvdec,hevc_nvdec \
    --enable-muxer=null,yuv4mpegpipe,rawvideo,framemd5 \
    --enable-encoder=rawvideo,wrapped_avframe \
    --enable-filter=null,format,scale,hwdownload,anull,aformat,aresample \
    >"$work/configure.log" || { tail -30 "$work/configure.log" >&2; exit 1; }
make -j"$(nproc)" >"$work/make.log" 2>&1 || { tail -40 "$work/make.log" >&2; exit 1; }
make install >/dev/null
"$prefix/bin/ffmpeg" -hide_banner -hwaccels
ls -la "$prefix/lib"/*.a "$prefix/bin/ffmpeg"
