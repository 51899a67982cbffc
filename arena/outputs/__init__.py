"""What a run leaves behind: the metrics log and progress line, TensorBoard events, the report, ONNX exports."""
