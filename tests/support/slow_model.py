"""A YOLOv8-layout model that takes seconds a picture on a CPU: its boxes are a constant (as
yolo_model.py's), and beside them a chain of large matrix products that depends on the
picture (so that nothing is folded away at load). Usage: slow_model.py OUT.onnx PRODUCTS."""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out, products = sys.argv[1], int(sys.argv[2])
side = 64
boxes = np.zeros((1, 6, 8), np.float32)
nodes = [
    helper.make_node("ReduceMean", ["images"], ["mean"], keepdims=0),
    helper.make_node("Mul", ["mean", "zero"], ["nothing"]),
    helper.make_node("ConstantOfShape", ["square"], ["ones"],
                     value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.001])),
    helper.make_node("Add", ["ones", "nothing"], ["m0"]),
]
for k in range(products):
    nodes.append(helper.make_node("MatMul", [f"m{k}", f"m{k}"], [f"m{k + 1}"]))
nodes += [
    helper.make_node("ReduceMean", [f"m{products}"], ["heavy"], keepdims=0),
    helper.make_node("Mul", ["heavy", "zero"], ["none"]),
    helper.make_node("Add", ["boxes", "none"], ["output0"]),
]
graph = helper.make_graph(
    nodes, "slow",
    [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, side, side])],
    [helper.make_tensor_value_info("output0", TensorProto.FLOAT, list(boxes.shape))],
    [numpy_helper.from_array(boxes, "boxes"),
     numpy_helper.from_array(np.array(0.0, np.float32), "zero"),
     numpy_helper.from_array(np.array([3072, 3072], np.int64), "square")],
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 8
onnx.checker.check_model(model)
onnx.save(model, out)
