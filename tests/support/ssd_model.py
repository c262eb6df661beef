"""An ONNX model in one of the SSD output layouts whose outputs are known: constant
tensors (made to depend on the picture by adding 0 times its mean, cast as each output
is). Usage: ssd_model.py OUT.onnx tf|final|raw.

- tf: TensorFlow's Object Detection API: a uint8 (1, 300, 300, 3) input; detection_boxes
  (1, 4, 4) [top, left, bottom, right] normalized, detection_classes and detection_scores
  (1, 4) floats, num_detections (1) = 3 (the fourth row is padding).
- final: a float (1, 3, 300, 300) input; boxes (1, 3, 4) [left, top, right, bottom] in the
  input's pixels, labels (1, 3) int64, scores (1, 3).
- raw: a float (1, 3, 300, 300) input; scores (1, 5, 3) (class 0 the background) and boxes
  (1, 5, 4) [left, top, right, bottom] normalized; NMS at 0.45 leaves three boxes.
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out, layout = sys.argv[1], sys.argv[2]
nhwc = layout == "tf"
shape = [1, 300, 300, 3] if nhwc else [1, 3, 300, 300]
in_type = TensorProto.UINT8 if nhwc else TensorProto.FLOAT

if layout == "tf":
    outputs = {
        "detection_boxes": np.array([[[0.1, 0.2, 0.5, 0.4], [0.5, 0.5, 0.9, 0.8],
                                      [0.0, 0.0, 0.2, 0.2], [0.3, 0.3, 0.4, 0.4]]], np.float32),
        "detection_classes": np.array([[1, 3, 1, 1]], np.float32),
        "detection_scores": np.array([[0.9, 0.7, 0.3, 0.95]], np.float32),
        "num_detections": np.array([3], np.float32),
    }
elif layout == "final":
    outputs = {
        "boxes": np.array([[[30, 60, 120, 150], [150, 150, 270, 240], [0, 0, 10, 10]]], np.float32),
        "labels": np.array([[1, 2, 1]], np.int64),
        "scores": np.array([[0.8, 0.6, 0.2]], np.float32),
    }
else:
    outputs = {
        "scores": np.array([[[0.1, 0.9, 0.0],    # a person
                             [0.2, 0.8, 0.0],    # the same person, shifted: NMS drops it
                             [0.3, 0.0, 0.7],    # a car
                             [0.9, 0.05, 0.05],  # background
                             [0.4, 0.6, 0.55]]], np.float32),  # a person, and a car under NMS? no: far apart
        "boxes": np.array([[[0.1, 0.1, 0.3, 0.5], [0.11, 0.1, 0.31, 0.5], [0.5, 0.5, 0.9, 0.7],
                            [0.0, 0.0, 1.0, 1.0], [0.6, 0.0, 0.8, 0.2]]], np.float32),
    }

nodes = [
    helper.make_node("Cast", ["images"], ["asfloat"], to=TensorProto.FLOAT),
    helper.make_node("ReduceMean", ["asfloat"], ["mean"], keepdims=0),
    helper.make_node("Mul", ["mean", "zero"], ["nothing"]),
]
consts = [numpy_helper.from_array(np.array(0.0, np.float32), "zero")]
infos = []
for name, value in outputs.items():
    consts.append(numpy_helper.from_array(value.astype(np.float32), name + "_k"))
    if value.dtype == np.float32:
        nodes.append(helper.make_node("Add", [name + "_k", "nothing"], [name]))
        infos.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(value.shape)))
    else:
        nodes.append(helper.make_node("Add", [name + "_k", "nothing"], [name + "_f"]))
        nodes.append(helper.make_node("Cast", [name + "_f"], [name], to=TensorProto.INT64))
        infos.append(helper.make_tensor_value_info(name, TensorProto.INT64, list(value.shape)))
graph = helper.make_graph(
    nodes, "ssd",
    [helper.make_tensor_value_info("images", in_type, shape)],
    infos,
    consts,
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 8
onnx.checker.check_model(model)
onnx.save(model, out)
