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

# Fuzzing (libFuzzer): a build of its own ($(FUZZ_BUILD), clang,
# -Dfuzz=true: fuzz/meson.build lists the targets), whose `fuzz` target
# builds them and runs each for FUZZ_SECONDS (fuzz/run.sh); a crash fails.
FUZZ_SECONDS ?= 60
FUZZ_BUILD ?= $(BUILD)-fuzz
FUZZ_CC ?= clang

fuzz: deps-fuzz
	@test -f $(FUZZ_BUILD)/build.ninja || \
		CC=$(FUZZ_CC) meson setup $(FUZZ_BUILD) --werror -Dfuzz=true $(MESON_OPTS) >/dev/null
	FUZZ_SECONDS=$(FUZZ_SECONDS) ninja -C $(FUZZ_BUILD) fuzz

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
