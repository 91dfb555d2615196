// Every differentiable op of braid, in one include.
#pragma once

#include "braid/ops/activation.h"
#include "braid/ops/attention.h"
#include "braid/ops/elementwise.h"
#include "braid/ops/embedding.h"
#include "braid/ops/loss.h"
#include "braid/ops/matmul.h"
#include "braid/ops/norm.h"
#include "braid/ops/reduce.h"
#include "braid/ops/views.h"
