// Umbrella header: #include <onyx/onyx.h> and `using namespace onyx;` is all a
// user needs for the graph API, the ops, ONNX import/export, the runtime,
// training and params I/O. (The protobuf-level headers, onnx/model_file.h and
// onnx/tensor_proto.h, stay out: they pull in the ONNX package's headers.)
#pragma once

#include <onyx/core/allocator.h>
#include <onyx/core/device.h>
#include <onyx/core/error.h>
#include <onyx/core/logging.h>
#include <onyx/core/ptr.h>
#include <onyx/core/shape.h>
#include <onyx/core/tensor.h>
#include <onyx/core/types.h>
#include <onyx/onnx/checker.h>
#include <onyx/onnx/opset.h>
#include <onyx/onnx/writer.h>
#include <onyx/graph/expression_graph.h>
#include <onyx/graph/node.h>
#include <onyx/graph/node_initializers.h>
#include <onyx/graph/debug.h>
#include <onyx/graph/passes/passes.h>
#include <onyx/graph/profiler.h>
#include <onyx/graph/onnx_export.h>
#include <onyx/graph/onnx_import.h>
#include <onyx/ops/ops.h>
#include <onyx/converters/native_model.h>
#include <onyx/converters/onnx_exporter.h>
#include <onyx/converters/onnx_importer.h>
#include <onyx/runtime/model.h>
#include <onyx/runtime/session.h>
#include <onyx/train/accumulate.h>
#include <onyx/train/checkpoint.h>
#include <onyx/train/dataset.h>
#include <onyx/train/grad_scaler.h>
#include <onyx/train/losses.h>
#include <onyx/train/optimizers.h>
#include <onyx/train/schedule.h>
#include <onyx/train/trainer.h>
#include <onyx/io/image.h>
#include <onyx/io/json.h>
#include <onyx/io/npz.h>
