// All expression operators, one header per op family.
#pragma once
#include <onyx/ops/elementwise.h>
#include <onyx/ops/reduce.h>
#include <onyx/ops/shape.h>
#include <onyx/ops/indexing.h>
#include <onyx/ops/linalg.h>
#include <onyx/ops/nn.h>
#include <onyx/ops/norm.h>
#include <onyx/ops/conv.h>
#include <onyx/ops/resize.h>
#include <onyx/ops/quant.h>
#include <onyx/ops/attention.h>
#include <onyx/ops/signal.h>
#include <onyx/ops/vision.h>
#include <onyx/ops/random.h>
