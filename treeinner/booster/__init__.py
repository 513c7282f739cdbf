"""A native second-order gradient boosting library whose node statistics are exact.

``GBMRegressor`` and ``GBMClassifier`` are scikit-learn estimators (histogram splits, learned
missing-value directions, categorical features split by partitions of their categories as LightGBM
does, row and column subsampling, early stopping, UnbiasedGBM's split rule with
``split="unbiased"``, Dobra and Gehrke's (2001) p-value criterion with ``split="pvalue"``, and
the feature-selecting boosting of Han et al. (2020): ``feature_penalty``, ``penalty_scaling``,
``split_search="group_test"``, and ``MultiTaskGBMRegressor``/``MultiTaskGBMClassifier``).
Every node of the fitted ``ensemble_`` stores the training rows' gradient sum, hessian sum and
count, and leaf values are ``-lr G / (H + lambda)``, so all of treeinner's methods apply to it
exactly: ``treeinner.from_model(est)`` returns ``est.ensemble_``.
"""

from ._estimators import GBMClassifier, GBMRegressor
from ._multitask import MultiTaskGBMClassifier, MultiTaskGBMRegressor

__all__ = ["GBMClassifier", "GBMRegressor", "MultiTaskGBMClassifier", "MultiTaskGBMRegressor"]
