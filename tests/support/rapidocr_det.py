"""rapidocr's own text detection (PP-OCRv4, as rapidocr-onnxruntime runs it) on each image
named: one JSON line an image, its boxes as [left, top, right, bottom]."""
import json
import os
import sys

import cv2
import rapidocr_onnxruntime
import yaml
from rapidocr_onnxruntime.ch_ppocr_det import TextDetector

here = os.path.dirname(rapidocr_onnxruntime.__file__)
config = yaml.safe_load(open(os.path.join(here, "config.yaml")))["Det"]
config["model_path"] = os.path.join(here, config["model_path"])
detector = TextDetector(config)
for path in sys.argv[1:]:
    boxes, _ = detector(cv2.imread(path))
    found = [] if boxes is None else boxes
    print(json.dumps([[float(b[:, 0].min()), float(b[:, 1].min()), float(b[:, 0].max()), float(b[:, 1].max())] for b in found]))
