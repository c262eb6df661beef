#!/usr/bin/env bash
# The FFmpeg of the server build (issue 37): the whole headless product for a GPU server that
# has a driver and nothing else. Built here, reproducibly, from Debian's source package of the
# FFmpeg framepipe links against (5.1, with Debian's patches), NVIDIA's codec headers
# (libffmpeg-nvenc-dev) and Debian's static libraries of the encoders it writes:
#
#   scripts/ffmpeg-server.sh          build into target/ffmpeg-server/ (skipped when built)
#
# What it holds: static libavcodec, libavformat, libavutil, libswscale, libswresample and
# libavfilter with pkg-config files, beside the static libraries they need (libx264, libvpx,
# libopus, libsrt, libcrypto, zlib: copied next to them, so that the pkg-config crate links
# them statically too; it links dynamically what it finds under /usr). framepipe links them
# with `--features ffmpeg-static`, so the binary sent over carries them. bin/ffmpeg is built
# from the same, the yardstick there (`-hwaccel cuda`).
#
# What it reads and writes is what framepipe names: protocols file, pipe, udp, rtp, tcp,
# http, hls, rtmp and srt (RTSP is a demuxer and a muxer over them; no TLS, so no https); the demuxers and muxers of every container and stream the
# CLI takes (mp4/mov, mkv/webm, avi, ts, flv, HLS, RTSP/RTP, image sequences, y4m); the
# decoders of their usual video and audio; the encoders framepipe writes (libx264, MPEG-4,
# Motion JPEG, FFV1, libvpx VP9, PNG/PPM/BMP/TIFF, AAC, libopus); NVDEC for H.264 and HEVC
# (CUDA's and NVDEC's libraries are loaded at run time, from the driver). Nothing found on
# this machine is linked unless named (--disable-autodetect).
#
# Licence: libx264 is GPL, and libsrt brings OpenSSL 3 (Apache 2.0), so FFmpeg is configured
# --enable-gpl --enable-version3 and the static binary is GPL-3.0-or-later as a whole.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
prefix=$root/target/ffmpeg-server
version=5.1
built() { [ -x "$prefix/bin/ffmpeg" ] && [ -f "$prefix/lib/libavcodec.a" ] && [ -f "$prefix/lib/.pic" ]; }
if built; then
    echo "$prefix: built"
    exit 0
fi
# The assembler of FFmpeg's SIMD code (decoding on the CPU at full speed), the encoders' and
# protocols' static libraries, and what the project's builds need anyway.
. scripts/setup.sh
static_deps=(libx264-dev libvpx-dev libopus-dev libsrt-openssl-dev libssl-dev zlib1g-dev)
setup_packages nasm xz-utils patch "${static_deps[@]}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

# Debian's source package, through a private source list made from this machine's own apt
# sources (each `deb` entry as `deb-src`; the system's lists are left alone).
mkdir -p parts lists/partial
for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] && sed 's/^Types:.*/Types: deb-src/' "$f" >"parts/$(basename "$f")"
done
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] && sed -n 's/^deb \(.*\)/deb-src \1/p' "$f" >"parts/$(basename "$f" .list).list"
done
apt=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$work/parts" -o "Dir::State::Lists=$work/lists")
apt-get "${apt[@]}" -qq update

# Debian's static libx264 and libopus are built without -fPIC (their objects reach libc's
# `stderr` directly), which a shared library can't hold: the Python module links FFmpeg
# into one. Both are built here from their Debian sources, position-independent, and
# replace Debian's archives beside FFmpeg's (executables link them as well).
pic_libs() {
    mkdir -p "$prefix/lib" pic && (
        cd pic
        apt-get "${apt[@]}" -qq source x264 opus >/dev/null 2>&1
        cd "$(ls -d x264-*/)"
        ./configure --enable-static --enable-pic --disable-cli --prefix="$work/pic/out" >/dev/null
        make -j"$(nproc)" >/dev/null 2>&1 && make install >/dev/null
        cd ../"$(cd .. && ls -d opus-*/)"
        CFLAGS="-O2 -fPIC" ./configure --enable-static --disable-shared --with-pic \
            --disable-doc --disable-extra-programs --prefix="$work/pic/out" >/dev/null
        make -j"$(nproc)" >/dev/null 2>&1 && make install >/dev/null
    )
    cp pic/out/lib/libx264.a pic/out/lib/libopus.a "$prefix/lib/"
    touch "$prefix/lib/.pic"
}
if [ -x "$prefix/bin/ffmpeg" ] && [ -f "$prefix/lib/libavcodec.a" ]; then
    pic_libs
    echo "$prefix: built (x264 and opus position-independent)"
    exit 0
fi
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

# The static libraries the encoders and protocols need, beside FFmpeg's own (see the top):
# ld takes the first directory holding a library, so ffmpeg and ffprobe link them too.
mkdir -p "$prefix/lib"
for lib in x264 vpx opus srt crypto ssl z; do
    cp "/usr/lib/x86_64-linux-gnu/lib$lib.a" "$prefix/lib/"
done

cd "$src"
PKG_CONFIG_PATH=$work/pc ./configure \
    --prefix="$prefix" --enable-static --disable-shared --enable-pic \
    --pkg-config-flags=--static --extra-ldflags="-L$prefix/lib" --extra-libs="-lstdc++" \
    --disable-doc --disable-debug --disable-autodetect --disable-everything \
    --disable-avdevice --disable-postproc --disable-ffplay \
    --enable-gpl --enable-version3 \
    --enable-ffnvcodec --enable-nvdec --enable-zlib --enable-pthreads \
    --enable-libx264 --enable-libvpx --enable-libopus --enable-libsrt \
    --enable-network \
    --enable-protocol=file,pipe,udp,rtp,tcp,http,hls,rtmp,libsrt,crypto,data \
    --enable-demuxer=mov,matroska,avi,flv,live_flv,mpegts,hls,rtsp,rtp,sdp,h264,hevc,m4v \
    --enable-demuxer=yuv4mpegpipe,ivf,image2,image_png_pipe,image_jpeg_pipe,mjpeg,aac,mp3,wav \
    --enable-decoder=h264,hevc,mpeg4,vp8,vp9,mjpeg,ffv1,rawvideo,png,bmp,tiff,ppm,pgm,pgmyuv \
    --enable-decoder=aac,aac_latm,mp3,mp2,opus,ac3,vorbis,pcm_s16le,pcm_mulaw,pcm_alaw \
    --enable-parser=h264,hevc,mpeg4video,vp8,vp9,mjpeg,png,aac,aac_latm,mpegaudio,opus,ac3 \
    --enable-hwaccel=h264_nvdec,hevc_nvdec \
    --enable-muxer=mp4,mov,matroska,webm,avi,mpegts,flv,hls,segment,image2,rtsp,rtp,rtp_mpegts \
    --enable-muxer=null,yuv4mpegpipe,rawvideo,framemd5,framecrc,md5,adts,ivf,h264,hevc \
    --enable-encoder=libx264,mpeg4,mjpeg,ffv1,libvpx_vp9,png,ppm,bmp,tiff,aac,libopus \
    --enable-encoder=rawvideo,wrapped_avframe,pcm_s16le \
    --enable-bsf=h264_mp4toannexb,hevc_mp4toannexb,aac_adtstoasc,extract_extradata \
    --enable-bsf=vp9_superframe,dump_extradata,null \
    --enable-filter=null,format,scale,hwdownload,anull,aformat,aresample,abuffer,abuffersink \
    --enable-filter=buffer,buffersink \
    >"$work/configure.log" || { tail -30 "$work/configure.log" >&2; exit 1; }
make -j"$(nproc)" >"$work/make.log" 2>&1 || { tail -40 "$work/make.log" >&2; exit 1; }
make install >/dev/null
cd "$work" && pic_libs
"$prefix/bin/ffmpeg" -hide_banner -hwaccels
ls -la "$prefix/lib"/*.a "$prefix/bin/ffmpeg"
