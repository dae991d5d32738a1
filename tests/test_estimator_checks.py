"""scikit-learn's own estimator checks, on the backend that 'auto' resolves to."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from gpusvm import (
    FOBOSClassifier,
    FTRLClassifier,
    KernelPegasosSVC,
    PegasosSVC,
    RDAClassifier,
    SBPClassifier,
    TruncatedGradientClassifier,
)

# Why each listed check is expected to fail.
EXPECTED_FAILURES = {
    "check_sample_weight_equivalence_on_dense_data": (
        "stochastic solver: removing rows changes n and so the rows drawn at each step, "
        "so a zero weight is not the same as a missing row (SGDClassifier is listed likewise)"
    ),
    "check_sample_weight_equivalence_on_sparse_data": "as for dense data",
}


PEGASOS_FAILURES = {
    "check_class_weight_classifiers": (
        "the check's 50 rows make an epoch one step at batch 64. With class weights of 1000 and "
        "1e-4 the objective moves by more than tol between steps, and the default tol stops "
        "after 33 to 35 epochs at about 10^3 (2 classes) to 10^4 (3 classes) times the "
        "objective 20,000 steps reach; even max_iter=1000 with tol=None leaves 52% and 70% of "
        "the test rows in class 0 where the check wants 87%. 20,000 steps give 88% and 96% "
        "(measured; test_pegasos.py checks class_weight on moderate weights instead)"
    ),
}


def expected_failed_checks(estimator):
    if isinstance(estimator, PegasosSVC):
        return {**EXPECTED_FAILURES, **PEGASOS_FAILURES}
    return EXPECTED_FAILURES


@parametrize_with_checks(
    [
        PegasosSVC(random_state=0),
        KernelPegasosSVC(random_state=0),
        SBPClassifier(random_state=0),
        FTRLClassifier(random_state=0),
        TruncatedGradientClassifier(random_state=0),
        FOBOSClassifier(random_state=0),
        RDAClassifier(random_state=0),
    ],
    expected_failed_checks=expected_failed_checks,
)
def test_scikit_learn_estimator_checks(estimator, check):
    check(estimator)
