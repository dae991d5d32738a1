"""What the estimators share: the scikit-learn base (``base``: fitting, backend,
prediction's output), the prediction of kernel and linear models (``kernel_model``,
``linear_model``), one-vs-one's pairs and votes (``one_vs_one``), and the checks of a
model's parts when it is loaded (``model_checks``).

The registry of solvers (``gpusvm/_registry.py``) names the public estimator classes, so
it sits above them, beside ``model_io`` and ``cli`` that read it.
"""
