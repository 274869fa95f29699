# vllm-turing: the vLLM OpenAI server with the Turing clamp applied and proven at build time.
# Built by `python3 build.py` (see README). Layers are ordered so that editing entrypoint/
# re-runs neither the patch nor the fit check, and changing EXTRAS re-runs neither.
#
# Default base: the official image of the pinned release, by tag. For a reproducible
# build pin its digest: --base vllm/vllm-openai:v0.33.0@sha256:<digest> (docker inspect
# --format '{{index .RepoDigests 0}}' vllm/vllm-openai:v0.33.0 prints it).
ARG BASE_IMAGE=vllm/vllm-openai:v0.33.0

# Our sources, as the build's steps run them: each step mounts the stage it needs (RUN --mount=...,from=),
# so no layer of the image holds them; the image ships them as one zip (the code stage). The fit check's
# sources first, then the image facts', then the entrypoint's, so that an edit of the entrypoint re-runs
# neither the clamp, the fit check nor the image facts, and an edit of the rest of the contract not the
# fit check.
# The one door every outside file, archive, remote answer and printed line passes through (door/): the
# patches and the fit check read through it too. Of the contract, the fit check needs only its own names.
FROM scratch AS fit-sources
COPY door/ /door/
COPY contract/__init__.py contract/clamp_paths.py contract/compile_record.py contract/devices.py \
     contract/distributions.py contract/model_config.py /contract/
COPY patches/ /patches/
# The rest of the contract's modules, each copied once (tests/unit/test_dockerfile_agreement.py); its data,
# the locks and compile records, are build inputs, not the image's.
FROM fit-sources AS facts-sources
COPY contract/layout.py contract/pins.py contract/verdict.py /contract/
COPY imagefacts/ /imagefacts/
FROM facts-sources AS sources
COPY entrypoint/ /entrypoint/

# Our code as the image runs it (contract/layout.py's CODE_ZIP, buildtool/image/code_zip.py): one zip of
# every module's source and, beside it, its bytecode, compiled here by the image's own Python. Not the fit
# check's passes (patches/fitcheck/image_passes.py): only the proof stage runs them. Bytecode for every
# module but those only the build side runs (the fit check's recording and compiling, the clamp's apply,
# the image facts' writer): no start imports them (tests/unit/test_bytecode.py holds it), and where they
# run (the build, build.py's verification, a preflight's full check on a table miss) vLLM's imports take
# seconds anyway. The server may run as any uid on a read-only root, where Python cannot write
# __pycache__: without the bytecode every start (and every health check, which imports sitecustomize)
# compiled our modules again. Without the column tables (-X no_debug_ranges: 7 % smaller; these modules'
# tracebacks lose their ^^^, not their lines).
FROM ${BASE_IMAGE} AS code
RUN --mount=type=bind,from=sources,target=/run/vllm-turing-sources \
    --mount=type=bind,source=buildtool/image/code_zip.py,target=/run/vllm-turing-code-zip.py \
    set -e; \
    cp -R /run/vllm-turing-sources /opt/vllm-turing-code; \
    rm /opt/vllm-turing-code/patches/fitcheck/image_passes.py; \
    mkdir -p /opt/vllm-turing; \
    python3 -X no_debug_ranges /run/vllm-turing-code-zip.py /opt/vllm-turing-code /opt/vllm-turing/vllm-turing.zip \
      -x '/(patches/fitcheck/(__main__|compiler|recorder|proof|fit_report|progress|op_recording|families/[a-z0-9_]+/launches)|patches/turing_clamp/__main__|patches/fp16_upcast/__main__|contract/(compile_record|pins)|imagefacts/__main__)\.py$'

FROM ${BASE_IMAGE} AS clamped

# The zip of our code first, then the folder of sitecustomize.py (contract/layout.py's IMAGE_PYTHONPATH).
ENV PYTHONPATH=/opt/vllm-turing/vllm-turing.zip:/opt/vllm-turing \
    TURING_CLAMP_FIT_TABLE=/opt/vllm-turing/fit-table.json
# The clamp's ranked configurations, which the patched vLLM reads by this path (patches/turing_clamp/runtime.py):
# here, before the proof, whose launches take them too.
COPY patches/turing_clamp/ranked-configs.json /opt/vllm-turing/patches/turing_clamp/

# The clamp, applied to the vLLM that `python3` imports (the unified-attention launcher and the
# encoder-attention launcher), then proven by compiling every launch of the built-in matrix for
# sm_75 (the Gemma 4 classes at tensor parallel 1, 2 and 4, the attention-only families' head sizes
# 64-256 and query-per-KV ratios, the encoder layers of embedding models, BERT-family encoders and
# multimodal towers, and the hybrids' attention layers and mixers, Mamba-2 and gated delta net; a
# misfit exits 1, naming the launch, and fails the build). The sm_86 pass
# (RTX 30xx) adds that target's own numbers to the fit table; the sm_90 pass (H100/H200, Gemma 4
# only) serves the GPU tier. The preflight on those devices then answers
# from the table's verdicts. CUDA_VISIBLE_DEVICES is empty so vLLM keeps Triton enabled on a build
# host without a GPU driver.
# The fp16 upcast (patches/fp16_upcast, docs/fp16.md) is applied to the same vLLM and checked: the Gemma 4
# 12B vision embedder's patch_dense and patch_ln2 run in fp32 when the engine runs in fp16 (Turing); a
# release without gemma4_unified.py reports `none`. A drifted file refuses (exit 2) and fails the build.
# Both run from the fit check's sources, mounted.
RUN --mount=type=bind,from=fit-sources,target=/run/vllm-turing-sources \
    set -e; \
    export PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=/run/vllm-turing-sources; \
    mkdir -p /opt/vllm-turing; \
    python3 -m patches.turing_clamp apply --site unified --json > /opt/vllm-turing/clamp-report.json; \
    python3 -m patches.turing_clamp apply --site encoder --json > /opt/vllm-turing/clamp-report-encoder.json; \
    python3 -m patches.turing_clamp check; \
    python3 -c 'import patches.turing_clamp as c, py_compile; [py_compile.compile(str(c.find_target(s)), doraise=True) for s in c.SITES.values()]'; \
    python3 -m patches.fp16_upcast apply --json > /opt/vllm-turing/fp16-report.json; \
    python3 -m patches.fp16_upcast check; \
    python3 -c 'import patches.fp16_upcast as u, py_compile; t = u.find_target(); t.is_file() and py_compile.compile(str(t), doraise=True)'
# The proof runs in a stage of its own: the image takes its fit table, reports and proved versions (the
# COPY --from=proof below), not what else it leaves (the compile record, the caches torch and vLLM write).
FROM clamped AS proof
# The passes, imported once and forked into two processes by target, so both cores stay busy
# (patches/fitcheck/image_passes.py): sm_75; sm_86 in fp16 and in bf16
# (Ampere runs a bf16 checkpoint in bf16, Turing casts it to fp16); sm_90, Gemma 4 only.
# Triton's cache lives in a BuildKit cache mount: a rebuild recompiles only changed kernels,
# and the 40 MB of compiled kernels stay out of the image. The compile record of this release
# (contract/compile-records/, contract/compile_record.py) answers the compiles an earlier build of
# the same Triton made, so a fresh host compiles only the rest and the full confirming compiles.
RUN --mount=type=cache,id=vllm-turing-fitcheck-triton,target=/root/.triton-fitcheck \
    --mount=type=bind,source=contract/compile-records,target=/run/vllm-turing-compile-records \
    --mount=type=bind,from=fit-sources,target=/run/vllm-turing-sources \
    set -e; \
    export PYTHONDONTWRITEBYTECODE=1 CUDA_VISIBLE_DEVICES= TRITON_CACHE_DIR=/root/.triton-fitcheck \
      PYTHONPATH=/run/vllm-turing-sources; \
    python3 -m patches.fitcheck.image_passes

# The proof's compile record alone, for build.py to export (--target compile-record --output type=local)
# and keep in contract/compile-records/ for the next fresh host's build.
FROM scratch AS compile-record
COPY --from=proof /opt/vllm-turing-proof/compile-record.json.gz /

# The image (the last stage: the default target).
FROM clamped AS image
COPY --from=proof /opt/vllm-turing/versions.json /opt/vllm-turing/fit-table.json /opt/vllm-turing/fit-report.json.gz \
     /opt/vllm-turing/fit-report-sm86.json.gz /opt/vllm-turing/fit-report-sm86-bf16.json.gz /opt/vllm-turing/

# Optional extra Python packages, installed without changing vLLM, torch or Triton (pinned
# to the versions the fit check proved; build.py's verification container checks again).
#   EXTRAS=audio: the audio stack (av, scipy, soundfile, mistral_common[audio])
# The host's index URLs arrive as BuildKit secrets, never build arguments (they may carry credentials).
ARG EXTRAS=
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=secret,id=ca,target=/run/secrets/ca \
    --mount=type=secret,id=pip-index-url,target=/run/secrets/pip-index-url \
    --mount=type=secret,id=pip-extra-index-url,target=/run/secrets/pip-extra-index-url \
    --mount=type=secret,id=pip-trusted-host,target=/run/secrets/pip-trusted-host \
    set -e; \
    case "$EXTRAS" in \
      "") exit 0 ;; \
      audio) pkgs="av scipy soundfile mistral_common[audio]" ;; \
      *) echo "EXTRAS=$EXTRAS is not known: use audio, or leave it empty" >&2; exit 2 ;; \
    esac; \
    if [ -s /run/secrets/ca ]; then export PIP_CERT=/run/secrets/ca; fi; \
    for v in PIP_INDEX_URL PIP_EXTRA_INDEX_URL PIP_TRUSTED_HOST; do \
      f=/run/secrets/$(echo "$v" | tr A-Z_ a-z-); if [ -s "$f" ]; then export "$v=$(cat "$f")"; fi; done; \
    python3 -m pip list --format=freeze 2>/dev/null \
      | grep -iE '^(vllm|torch|torchaudio|torchvision|triton)==' > /tmp/keep.txt; \
    python3 -m pip install --disable-pip-version-check -c /tmp/keep.txt $pkgs; \
    rm -f /tmp/keep.txt

# What the build knows about its own stack, read by the preflight at every start instead of
# importing torch and vLLM (seconds): the versions, torch's CUDA and arch list, the option table of
# the server's argument parser (so the exec'd argv is judged with vLLM's own options and aliases),
# the parser names and the quantization methods' minimum capabilities (imagefacts/), written from the
# image facts' sources, mounted (the folder made here too: the CPU vehicle runs no clamp step).
RUN --mount=type=bind,from=facts-sources,target=/run/vllm-turing-sources \
    mkdir -p /opt/vllm-turing \
    && PYTHONDONTWRITEBYTECODE=1 CUDA_VISIBLE_DEVICES= PYTHONPATH=/run/vllm-turing-sources \
       python3 -m imagefacts write /opt/vllm-turing/image-facts.json

# The units' cache volumes mount here. A named volume starts as a copy of the folder it is mounted
# on, so these folders, owned by group 0 and writable by it, let the server run as any uid in group
# 0 (`docker run --user 4242:0`, OpenShift) and still keep its caches.
# The steps above import torch and vLLM, which leave cache folders in /tmp (torchinductor_root,
# root/cutlass_python_cache): they go, so no uid meets a root-owned one at run time.
RUN mkdir -p /cache/huggingface /cache/vllm /opt/vllm-turing/triton-cache \
    && chgrp -R 0 /cache /opt/vllm-turing/triton-cache && chmod -R 0775 /cache /opt/vllm-turing/triton-cache \
    && rm -rf /tmp/torchinductor_root /tmp/root

# Our code: the zip the code stage made.
COPY --from=code /opt/vllm-turing/vllm-turing.zip /opt/vllm-turing/
# Python imports sitecustomize at every start; it acts only in the server process, where it bounds
# the HTTP drain on SIGTERM and ends open streams once the engine has stopped (docs/deploy.md,
# graceful stop), and prints an uncaught exception's traceback with the lines of our modules, which lie in the
# zip. A short file compiled at each start; what it imports comes from the zip.
COPY entrypoint/sitecustomize.py /opt/vllm-turing/sitecustomize.py

# The default user: uid 10001 in group 0, not root (buildtool/units/spec.py's POD_UID and POD_GID, the
# uid the Kubernetes pods run as; a unit test holds the three equal). Its home and the cache folders
# above are group 0 and writable by it, so any uid of group 0 runs the image the same (OpenShift).
# Root only where asked: `docker run --user 0`, compose `user: "0:0"`, Quadlet `User=0`.
# (--no-log-init: no sparse lastlog entry for a high uid.)
RUN useradd --no-log-init --uid 10001 --gid 0 --home-dir /home/vllm --create-home --shell /usr/sbin/nologin vllm \
    && chmod 0775 /home/vllm
USER 10001:0

EXPOSE 8000
# /health answers 503 until the model is loaded: the start period allows a 4-minute load.
# The units' health check (HEALTH and HEALTH_CMD of buildtool/units/spec.py, which say why these
# timeouts); a unit test holds the two equal.
HEALTHCHECK --interval=30s --timeout=10s --start-period=300s --retries=3 \
    CMD python3 -c 'import os, urllib.request; urllib.request.urlopen("http://127.0.0.1:" + os.environ.get("PORT", "8000") + "/health", timeout=8)'
ENTRYPOINT ["python3", "-m", "entrypoint"]
CMD []
LABEL org.opencontainers.image.title="vllm-turing" \
      org.opencontainers.image.description="vLLM OpenAI server with the Turing shared-memory clamp, proven for sm_75 at build time"
