"""An ONNX model in one of Ultralytics' YOLO output layouts whose output is known: a
constant tensor (made to depend on the picture by adding 0 times its mean), with the
`names` metadata Ultralytics writes. Usage: yolo_model.py OUT.onnx v8|v8dyn|v5|nms SIDE|HxW.
v8dyn is v8 exported as Ultralytics' dynamic=True exports it: every axis free but the
rows, the size in its `imgsz` metadata."""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out, layout = sys.argv[1], sys.argv[2]
dynamic = layout == "v8dyn"
layout = "v8" if dynamic else layout
height, _, width = sys.argv[3].partition("x")
height, width = int(height), int(width or height)
# Boxes in the model's input pixels: centre x, centre y, width, height, class scores.
anchors = [
    (20.0, 20.0, 16.0, 16.0, [0.9, 0.0]),  # person
    (21.0, 20.0, 16.0, 16.0, [0.8, 0.0]),  # overlaps it: NMS drops it
    (44.0, 40.0, 10.0, 20.0, [0.1, 0.6]),  # car
    (50.0, 50.0, 4.0, 4.0, [0.1, 0.2]),    # below the score
] + [(8.0, 8.0, 2.0, 2.0, [0.0, 0.0])] * 16  # as many anchors as a model has: more than attributes
if layout == "v8":
    data = np.array([[a[0], a[1], a[2], a[3], *a[4]] for a in anchors], np.float32).T[None]
elif layout == "v5":
    data = np.array([[a[0], a[1], a[2], a[3], 1.0, *a[4]] for a in anchors], np.float32)[None]
else:
    rows = [(a[0] - a[2] / 2, a[1] - a[3] / 2, a[0] + a[2] / 2, a[1] + a[3] / 2,
             max(a[4]), float(np.argmax(a[4]))) for a in anchors[:4] if a is not anchors[1]]
    data = np.array(rows, np.float32)[None]
const = numpy_helper.from_array(data, "boxes")
zero = numpy_helper.from_array(np.array(0.0, np.float32), "zero")
nodes = [
    helper.make_node("ReduceMean", ["images"], ["mean"], keepdims=0),
    helper.make_node("Mul", ["mean", "zero"], ["nothing"]),
    helper.make_node("Add", ["boxes", "nothing"], ["output0"]),
]
graph = helper.make_graph(
    nodes, "yolo",
    [helper.make_tensor_value_info(
        "images", TensorProto.FLOAT,
        ["batch", 3, "height", "width"] if dynamic else [1, 3, height, width])],
    [helper.make_tensor_value_info(
        "output0", TensorProto.FLOAT,
        ["batch", data.shape[1], "anchors"] if dynamic else list(data.shape))],
    [const, zero],
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 8
props = {"names": "{0: 'person', 1: 'car'}"}
if dynamic:
    props["imgsz"] = f"[{height}, {width}]"
helper.set_model_props(model, props)
onnx.checker.check_model(model)
onnx.save(model, out)
