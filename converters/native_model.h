// The native model file: one .npz that numpy and a text editor can read.
//   <param or constant name>.npy   each param's and constant's value, under its graph name
//   graph.json                      the graph in friendly op names (inputs, nodes, outputs)
//
//   z = numpy.load("model.npz"); z["fc1.W"]; json.loads(z["graph.json"])
//
// graph.json, version 1:
//   {"format": "onyx-native", "version": 1, "graph_name": ..., "doc_string": ...,
//    "producer_name": ..., "producer_version": ...,
//    "inputs":  [{"name": "x", "type": "float32", "shape": [1, 4], "dims": ["batch", ""]}],
//    "nodes":   [{"name": "fc1.W", "kind": "param", "type": "float32", "shape": [4, 8], "trainable": true},
//                {"name": "h", "op": "matmul", "inputs": ["x", "fc1.W"], "attrs": {"transA": 0, ...},
//                 "type": "float32", "shape": [1, 8]}, ...],
//    "outputs": [{"name": "y", "node": "h"}],
//    "doc_strings": {"h": "..."}}
// Non-finite float attributes are the strings "inf", "-inf", "nan". String
// constants sit in the JSON ("value": [...]); types numpy has no dtype for
// (float8, int4, ...) are stored as their raw bytes in a uint8 .npy with
// "storage": "raw".
#pragma once
#include <string>

#include <onyx/converters/onnx_exporter.h>

namespace onyx {

// The graph entry (JSON text) and the arrays of a native model.
std::string nativeGraphJson(const GraphSpec& spec);
void saveNative(const std::string& path, const GraphSpec& spec);  // atomic

// Rebuilds a saved graph into `graph` (params are created trainable as
// saved); returns its outputs and descriptive fields. Every inconsistency (a
// corrupt file, an unknown op or attribute, a param whose shape contradicts
// the graph, a shape inference that contradicts the recorded shape) throws a
// one-line onyx::Error naming the file and node.
GraphSpec loadNative(const std::string& path, ExpressionGraph& graph);

}  // namespace onyx
