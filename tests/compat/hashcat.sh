#!/bin/sh
# hashcat's CUDA backend (Debian's hashcat: dlopen of libcuda.so.1,
# libnvrtc and libnvidia-ml.so.1; kernels compiled with NVRTC, loaded with
# cuModuleLoadDataEx, launched with cuLaunchKernel on streams with events).
# Prints RESULT lines for run-compat.py; exit status 77 without hashcat.
#
#   backend_info   hashcat -I lists the CUDA devices with their name and memory
#   self_test      the kernel self-test: it checks kernel results, which cusim
#                  does not compute, so it fails (expected; not a cusim defect)
#   attack         a mask attack with the self-test off runs to exhaustion
#                  (exit status 1): NVRTC, module loads, launches, copies
command -v hashcat >/dev/null 2>&1 || { echo "hashcat not installed" >&2; exit 77; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
# hashcat keeps its kernel cache and session files under $HOME.
export HOME="$work"
printf '%s\n' "$(printf '12' | md5sum | cut -d' ' -f1)" >hash.txt

if hashcat -I --backend-ignore-opencl >info.txt 2>&1 && grep -q 'CUDA.Version' info.txt &&
	grep -q 'Name.*NVIDIA H100' info.txt; then
	echo "RESULT hashcat.backend_info ok"
else
	echo "RESULT hashcat.backend_info fail"
	cat info.txt >&2
fi

hashcat -m 0 -a 3 --backend-ignore-opencl -d 1 --potfile-disable --quiet -O hash.txt '?d?d' \
	>selftest.txt 2>&1
if grep -q 'self-test failed' selftest.txt; then
	echo "RESULT hashcat.self_test fail"
else
	echo "RESULT hashcat.self_test ok"
fi

hashcat -m 0 -a 3 --backend-ignore-opencl -d 1 --potfile-disable --quiet -O --self-test-disable \
	hash.txt '?d?d' >attack.txt 2>&1
status=$?
if [ "$status" -eq 1 ]; then
	echo "RESULT hashcat.attack ok"
else
	echo "RESULT hashcat.attack fail"
	echo "exit status $status" >&2
	cat attack.txt >&2
fi
