#!/bin/sh
# FFmpeg's CUDA hardware frames (Debian's ffmpeg, which loads libcuda.so.1
# with dlopen and needs cuGLGetDevices_v2 and the other interop symbols to
# load it at all): frames uploaded to device memory (hwupload: cuMemAlloc,
# cuMemcpy2DAsync) and downloaded again (hwdownload) must come back
# bit-identical to the same frames never uploaded, per pixel format.
# Prints RESULT lines for run-compat.py; exit status 77 without ffmpeg.
#
# Filters that run CUDA kernels (scale_cuda, overlay_cuda, yadif_cuda, ...)
# are not run: cusim does not compute the results of their kernels.
command -v ffmpeg >/dev/null 2>&1 || { echo "ffmpeg not installed" >&2; exit 77; }

src="testsrc2=size=160x120:rate=5"
for fmt in nv12 yuv420p p010le yuv444p rgb0; do
	ref=$(ffmpeg -hide_banner -loglevel error -f lavfi -i "$src" -frames:v 3 \
		-vf "format=$fmt" -f framemd5 - 2>&1 | grep -v '^#')
	got=$(ffmpeg -hide_banner -loglevel error -init_hw_device cuda=cu:0 -filter_hw_device cu \
		-f lavfi -i "$src" -frames:v 3 -vf "format=$fmt,hwupload,hwdownload,format=$fmt" \
		-f framemd5 - 2>&1 | grep -v '^#')
	if [ -n "$ref" ] && [ "$ref" = "$got" ]; then
		echo "RESULT ffmpeg.hwupload_hwdownload_$fmt ok"
	else
		echo "RESULT ffmpeg.hwupload_hwdownload_$fmt fail"
		printf 'expected:\n%s\ngot:\n%s\n' "$ref" "$got" >&2
	fi
done

# Two CUDA devices named by index, and a device that does not exist.
if ffmpeg -hide_banner -loglevel error -init_hw_device cuda=a:0 -init_hw_device cuda=b:1 \
	-f lavfi -i nullsrc=s=16x16 -frames:v 1 -f null - 2>/dev/null; then
	echo "RESULT ffmpeg.two_devices ok"
else
	echo "RESULT ffmpeg.two_devices fail"
fi
if ffmpeg -hide_banner -loglevel error -init_hw_device cuda=x:7 \
	-f lavfi -i nullsrc=s=16x16 -frames:v 1 -f null - 2>/dev/null; then
	echo "RESULT ffmpeg.no_such_device fail"
else
	echo "RESULT ffmpeg.no_such_device ok"
fi
