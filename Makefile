# Thin wrapper over Meson: every target here is one Meson/ninja invocation.
BUILD ?= build
PREFIX ?= /usr/local
MESON_OPTS ?=

.PHONY: all deps setup test demo bench install clean fuzz

all: setup
	ninja -C $(BUILD)

deps:
	@scripts/deps.sh

setup: deps
	@test -f $(BUILD)/build.ninja || meson setup $(BUILD) --werror $(MESON_OPTS)

test: all
	meson test -C $(BUILD) --print-errorlogs --num-processes 2

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

clean:
	rm -rf $(BUILD) $(BUILD)-install
