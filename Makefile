# Thin wrapper over Meson: every target here is one Meson/ninja invocation.
BUILD ?= build
PREFIX ?= /usr/local
MESON_OPTS ?=

.PHONY: all deps deps-fuzz setup test compat demo bench install deb deb-check clean fuzz fresh-check

all: setup
	ninja -C $(BUILD)

# Debian packages by group (scripts/deps.sh): what the build and the tests need,
# what `make fuzz` adds.
deps:
	@scripts/deps.sh build

deps-fuzz:
	@scripts/deps.sh build fuzz

setup: deps
	@test -f $(BUILD)/build.ninja || meson setup $(BUILD) --werror $(MESON_OPTS)

test: all
	meson test -C $(BUILD) --print-errorlogs --num-processes 2 --no-suite compat

# Third-party programs on bare cusim and under libcuslice (tests/compat, docs/compat.md).
compat: all
	@scripts/deps.sh compat
	meson test -C $(BUILD) --print-errorlogs --suite compat

demo: all
	@scripts/demo.sh $(BUILD)

bench: all
	meson test -C $(BUILD) --suite bench --benchmark --verbose

# Installed programs are built without the sanitizers the test build uses.
install: deps
	@test -f $(BUILD)-install/build.ninja || \
		meson setup $(BUILD)-install --werror -Dsanitize=false $(MESON_OPTS) >/dev/null
	meson configure $(BUILD)-install -Dprefix=$(abspath $(PREFIX)) >/dev/null
	ninja -C $(BUILD)-install
	meson install -C $(BUILD)-install --no-rebuild

# Debian packages (debian/, docs/packaging.md) into $(BUILD)-deb/: cuslice
# (daemon, CLI, unit), libcuslice, cusim, cuslice-slurm, cuslice-k8s.
deb:
	@scripts/deps.sh build deb
	@scripts/make-deb.sh $(BUILD)-deb

# Fuzzing (libFuzzer): every target is compiled on its own with clang (no Meson
# build dir: each is one test file and the few pure sources it exercises) into
# $(FUZZ_BUILD), then run FUZZ_SECONDS each by fuzz/run.sh; a crash fails.
FUZZ_SECONDS ?= 60
FUZZ_BUILD ?= $(BUILD)-fuzz
FUZZ_CC ?= clang
FUZZ_CFLAGS := -std=c17 -D_GNU_SOURCE -g -O1 -Wall -Wextra -Wshadow -Wvla \
	-fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined \
	-fno-sanitize-recover=undefined \
	-Iinclude -Isrc/common -Isrc/group -Isrc/ipc -Isrc/preload -Isrc/daemon -Isrc/daemon/http \
	-Isrc/k8s
FUZZ_TARGETS := ipc size limits config policy claim http
# Sources per target. src/group and src/common are libc-only libraries, linked whole.
FUZZ_SRC_ipc := fuzz/fuzz-ipc.c src/ipc/cs-ipc.c $(wildcard src/group/*.c src/common/*.c)
FUZZ_SRC_size := fuzz/fuzz-size.c src/common/cs-size.c
FUZZ_SRC_limits := fuzz/fuzz-limits.c src/preload/cs-limits.c src/common/cs-size.c
FUZZ_SRC_config := fuzz/fuzz-config.c src/daemon/cd-config.c $(wildcard src/common/*.c)
FUZZ_LIBS_config := -linih
FUZZ_SRC_policy := fuzz/fuzz-policy.c src/daemon/cd-policy.c src/daemon/cd-config.c \
	src/daemon/cd-json.c src/preload/cs-limits.c $(wildcard src/common/*.c)
FUZZ_LIBS_policy := -lcjson -linih -lm
FUZZ_SRC_claim := fuzz/fuzz-claim.c src/k8s/dra-claim.c src/k8s/k8s-quantity.c $(FUZZ_SRC_policy:fuzz/fuzz-policy.c=)
FUZZ_LIBS_claim := $(FUZZ_LIBS_policy)
# The API's front door (the event loop's judgement of request bytes) and its error responses.
FUZZ_SRC_http := fuzz/fuzz-http.c src/daemon/http/http-head.c src/daemon/http/http-errors.c
FUZZ_LIBS_http := -lcjson -lmicrohttpd
# Longest input per target: a few IPC messages; a long limit list; a config file; a
# policy body (the API takes up to 64 KiB, but the fields fit in far less); a whole
# request as the front door sees it (32 KiB head + 64 KiB body).
FUZZ_MAX_LEN_ipc := 4096
FUZZ_MAX_LEN_size := 64
FUZZ_MAX_LEN_limits := 2048
FUZZ_MAX_LEN_config := 4096
FUZZ_MAX_LEN_policy := 8192
FUZZ_MAX_LEN_claim := 8192
FUZZ_MAX_LEN_http := 98304

fuzz: deps-fuzz $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/fuzz-%)
	@fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) \
		$(foreach t,$(FUZZ_TARGETS),$(t):$(FUZZ_MAX_LEN_$(t)))

.SECONDEXPANSION:
$(FUZZ_BUILD)/fuzz-%: $$(FUZZ_SRC_$$*) $(wildcard src/*/*.h src/daemon/http/*.h include/cuslice/*) | deps-fuzz
	@mkdir -p $(FUZZ_BUILD)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $(FUZZ_SRC_$*) $(FUZZ_LIBS_$*)

# The README's two commands (make test, make demo), run as root in a fresh
# minimal Debian 12 root made by debootstrap, from a clean clone of HEAD under
# /root (mode 0700), the CUDA toolkit bind-mounted. Skipped with a message
# where debootstrap cannot run. Cache: .cache/fresh (rm -r it to start over).
fresh-check:
	@scripts/fresh-check.sh

# The packages installed, upgraded (to the same tree built as a newer
# version) and removed in a fresh Debian 12 root (scripts/deb-test.sh), as
# root; skipped with a message where fresh-check cannot run.
deb-check:
	@scripts/deps.sh build deb fresh
	@CUSLICE_DEB_VERSION= scripts/make-deb.sh $(BUILD)-deb/v1
	@CUSLICE_DEB_VERSION=$$(dpkg-parsechangelog -S Version)+check1 scripts/make-deb.sh $(BUILD)-deb/v2
	@FRESH_FILES=$(BUILD)-deb FRESH_COMMANDS="sh scripts/deb-test.sh /root/files/v1 /root/files/v2" \
		scripts/fresh-check.sh

clean:
	rm -rf $(BUILD) $(BUILD)-install $(BUILD)-deb $(FUZZ_BUILD)
