// Scene labels for multi-camera models: a batch of scenes × views images in which every view of
// a scene carries the scene's label.
#pragma once

#include <memory>

#include "tessera/data/dataset.hpp"

namespace tessera::data {

/// A classification dataset seen as scenes of `views` consecutive samples: sample i has the
/// pixels of `inner`'s sample i and the label of its sample (i / views)·views, the scene's first
/// view. Images s·V … s·V+V−1 of a batch are then one scene's views as long as the batch order
/// keeps samples in index order (no shuffling: a shuffle permutes images, not scenes) and its
/// size is a multiple of V (a whole number of V's). Its size is `inner`'s rounded down to whole
/// scenes, so batches wrap around at a scene boundary. Loading costs one more load of the rank's
/// part of the batch (the first views' labels come only with their pixels). `inner` itself for
/// views = 1. Throws InvalidArgument for a null dataset, views < 1, or (with views > 1) a
/// segmentation dataset or one smaller than a scene.
std::shared_ptr<const Dataset> scene_labels(std::shared_ptr<const Dataset> inner, int views);

}  // namespace tessera::data
