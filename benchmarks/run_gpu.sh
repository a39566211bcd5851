#!/bin/bash
# Everything that needs a CUDA GPU, in one go: the CUDA tests (kernel on device, variable-length attention, CUDA
# graphs, half precision), then the GPU benchmarks, whose results land in benchmarks/results/.
#
#     bash benchmarks/run_gpu.sh            # tests + benchmarks
#     bash benchmarks/run_gpu.sh --smoke    # tests + tiny benchmark sizes (checks the scripts run)
set -o pipefail
cd "$(dirname "$0")/.." || exit 1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
PYTHON=${PYTHON:-python3}
status=0

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
$PYTHON -c "import torch, transformers, triton; print('torch', torch.__version__, 'transformers', transformers.__version__, 'triton', triton.__version__)"

$PYTHON -m pytest -q -p no:cacheprovider -rs tests/test_rotary_kernel.py tests/test_padding_free.py tests/test_packing.py tests/test_host_syncs.py \
    tests/test_training.py tests/test_precision.py tests/test_linear_attention.py tests/test_attention.py || status=1
# ZeRO-3 with the optimizer offloaded, on one GPU (needs DeepSpeed: pip install "hf_roformer[distributed]"; skipped
# without it).
$PYTHON -m pytest -q -p no:cacheprovider -rs tests/test_deepspeed.py -k "gpu" || status=1

if [ "$1" = "--smoke" ]; then
    $PYTHON benchmarks/bench_speed_gpu.py --smoke || status=1
else
    $PYTHON benchmarks/bench_speed_gpu.py || status=1
    $PYTHON benchmarks/bench_models.py --preset gpu || status=1
    $PYTHON benchmarks/bench_linear_attention.py --device cuda || status=1
fi
exit $status
