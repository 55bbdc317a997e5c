// The image-folder side of resolve_train: data images:DIR opened with the spec's transforms, its
// layout deciding the task and, unless given, the class count.
#pragma once

#include "tessera/run/resolve.hpp"

namespace tessera::run {

/// With spec.data "images:DIR": opens the folder into setup.images and sets the model's task and
/// classes from it (c.train.input and seed already resolved). Throws InvalidArgument naming the
/// field: a folder that does not exist, a task given that differs from the folder's layout, a
/// segmentation folder without classes.
void resolve_image_folder(const RunSpec& spec, TrainSetup& setup);

/// What a run over an image folder should be told before it starts, or "": with the images split
/// along H over more than one rank, how many of its JPEGs each rank below the top must decode
/// from the top (no restart markers), and the command that adds the markers.
std::string images_notice(const TrainSetup& setup);

/// Refuses init_from with resume, and an init_from file that does not exist.
void check_init_from(const RunSpec& spec);

}  // namespace tessera::run
