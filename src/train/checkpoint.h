// Training checkpoints: params, optimizer state (slots and step count), the
// graph's random generator and the loop position, in ONE .npz file written
// atomically (temporary file + rename), so a run killed at any moment -- even
// while saving -- leaves either the previous checkpoint or the new one.
//
// Layout (numpy can read it: np.load(path)):
//   param/<name>.npy          every param of the graph (trainable or not)
//   opt/<param>/<slot>.npy    the optimizer's state(), e.g. opt/W1/m, opt/W1/v
//   state.json                {"format", "version", "step", "epoch",
//                              "sample_offset", "optimizer_steps", "rng", "extra"}
//
// Resuming: build the model first (so graph.params() holds every param), then
// loadCheckpoint() restores params in place, the optimizer and graph.rng();
// training on from the returned TrainState gives the same params, bit for bit,
// as a run that was never interrupted.
#pragma once
#include <cstdint>
#include <map>
#include <string>

namespace onyx {

class ExpressionGraph;
class OptimizerBase;

struct TrainState {
  uint64_t step = 0;          // updates done
  uint64_t epoch = 0;         // current epoch
  uint64_t sampleOffset = 0;  // samples of the current epoch already consumed
  // The graph's std::mt19937_64 as written by operator<<. saveCheckpoint()
  // fills it from graph.rng() when left empty; loadCheckpoint() returns what
  // was stored (and has already put it into graph.rng()).
  std::string rng;
  std::map<std::string, std::string> extra;  // free-form (data-order seed, lr schedule, ...)
};

// Writes `path` atomically; an existing file there is replaced only once the
// new one is complete. Throws onyx::Error (naming the file) when a param has a
// type .npy cannot store or the file cannot be written; the old file is then
// untouched.
void saveCheckpoint(const std::string& path, ExpressionGraph& graph, OptimizerBase& opt, const TrainState& s);

// Restores params in place, the optimizer's state and step count, and
// graph.rng(). Everything is checked before anything changes: a param of the
// file missing from the graph (or of the graph missing from the file), a shape
// or type mismatch, a truncated or corrupt file is a one-line onyx::Error
// naming the file (and the param), and leaves graph and optimizer as they were.
TrainState loadCheckpoint(const std::string& path, ExpressionGraph& graph, OptimizerBase& opt);

}  // namespace onyx
