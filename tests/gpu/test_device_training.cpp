// The Trainer on a real CUDA device, against the CPU: the cases of tests/simt/train (which runs
// them on the emulated device). In the emulated GPU binary (braid_test_gpu_simt) they are left
// out, since braid_test_simt_train already runs them there.
#ifndef BRAID_SIMT
#include "../simt/train/device_training_cases.h"
#endif
