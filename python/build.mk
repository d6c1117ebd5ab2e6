# The Python package: the extension gpureclaim._gpureclaim (limited API,
# abi3) built from python/src/*.c and the core's objects, placed with
# links to the package's Python files in $(BUILD)/python/gpureclaim, so
# builds in different BUILD folders never share a file. `pip install .`
# (setup.py) builds the same sources for installation.
PY_INCLUDE := $(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_paths()["include"])' 2>/dev/null)
PY_PKG_DIR := $(BUILD)/python/gpureclaim
PY_EXT := $(PY_PKG_DIR)/_gpureclaim.abi3.so
PY_EXT_SRCS := $(wildcard python/src/*.c)
PY_EXT_OBJS := $(PY_EXT_SRCS:%.c=$(BUILD)/obj/%.o)
PY_PKG_FILES := $(wildcard python/gpureclaim/*.py python/gpureclaim/*.pyi \
	python/gpureclaim/py.typed)
PY_SUBPKGS := $(patsubst %/__init__.py,%,$(wildcard python/gpureclaim/*/__init__.py))

# PyErr_Fetch is soft-deprecated from 3.12 on (its replacement is not in
# the 3.11 limited API): a warning there must not fail the build.
$(PY_EXT_OBJS): CFLAGS += -DPy_LIMITED_API=0x030B0000 -I$(PY_INCLUDE) \
	-Wno-error=deprecated-declarations

$(PY_EXT): $(PY_EXT_OBJS) $(CORE_OBJS) python/src/ext.map $(PY_PKG_FILES)
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,--version-script=python/src/ext.map $(LDFLAGS) \
		-o $@ $(PY_EXT_OBJS) $(CORE_OBJS) $(LDLIBS)
	@for f in $(PY_PKG_FILES); do ln -sf $(abspath .)/$$f $(PY_PKG_DIR)/; done
	@for d in $(PY_SUBPKGS); do ln -sfn $(abspath .)/$$d $(PY_PKG_DIR)/; done

python-ext: $(PY_EXT)
.PHONY: python-ext
ALL_TARGETS += $(PY_EXT)

# Each test runs its scenario in a fresh interpreter on the simulated
# driver (which reads GPURECLAIM_SIM once).
test-python: $(PY_EXT) $(SIM_LIBS) $(FAKE_TORCH_LIBS) $(FAKE_TRACER)
	GPR_SIM_DIR=$(abspath $(BUILD)/sim) GPR_PY_PATH=$(abspath $(BUILD)/python) \
		GPR_FAKES_BUILD=$(abspath $(BUILD)/tests) \
		$(PYTHON) -m pytest -q -p no:cacheprovider tests/python
.PHONY: test-python
CHECK_RUNS += test-python

# gpureclaim.cluster on real engines (a Dask LocalCluster, gloo ranks, a
# local Ray) whose workers sit on the simulated driver (tests/cluster).
test-cluster: $(PY_EXT) $(SIM_LIBS)
	GPR_SIM_DIR=$(abspath $(BUILD)/sim) GPR_PY_PATH=$(abspath $(BUILD)/python) \
		$(PYTHON) -m pytest -q -p no:cacheprovider tests/cluster
.PHONY: test-cluster
CHECK_RUNS += test-cluster

# Every notebook view (tests/views): rendered on the simulated driver,
# checked as HTML (well-formed, self-contained, its figures present).
test-views: $(PY_EXT) $(SIM_LIBS) $(BUILD)/gpureclaim $(TRACE_TEST_DIR)/test_trace_log
	GPR_SIM_DIR=$(abspath $(BUILD)/sim) GPR_PY_PATH=$(abspath $(BUILD)/python) \
	GPURECLAIM_BIN=$(abspath $(BUILD)/gpureclaim) \
	GPR_TRACE_SAMPLE=$(abspath $(TRACE_TEST_DIR)/test_trace_log) \
		$(PYTHON) -m pytest -q -p no:cacheprovider tests/views
.PHONY: test-views
CHECK_RUNS += test-views

# Every example of README.md and docs/*.md (tests/docs/docs.py, the one
# runner): those that need no GPU run here, on the simulated driver; the
# GPU-only ones run on the GPU machine (scripts/gpu-check.sh docs).
test-docs: build-all
	$(PYTHON) -m pytest -q -p no:cacheprovider tests/docs
.PHONY: test-docs
CHECK_RUNS += test-docs
