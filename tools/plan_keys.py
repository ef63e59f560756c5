"""Dump every notebook plan's cells (key, variant, paper coordinates) for several parameter sets."""
import json, sys
from stamplib import experiments
out = {}
cases = [dict(profile=p, data_root=r) for p in ("smoke", "quick", "full") for r in ("", "/data")]
cases += [dict(profile="quick", seeds="0,1", methods="tent,stamp,cotta", datasets="cifar10,digits", outlier_sets="noise,svhn", corruptions="all", severity=3, outlier_ratio=0.3)]
cases += [dict(profile="quick", datasets="cifar10_c,cifar10_jpeg_8_2", outlier_sets="heldout_classes")]
for i, case in enumerate(cases):
    for nb in experiments.EXPERIMENTS:
        if nb.startswith("00"):
            continue
        try:
            plan = experiments.plan(nb, **case)
            out[f"{i}:{nb}"] = [(c.spec.key(), c.variant, c.paper_dataset, c.paper_outliers, c.spec.to_dict()) for c in plan.cells]
        except Exception as e:
            out[f"{i}:{nb}"] = f"ERROR {type(e).__name__}: {e}"
json.dump(out, open(sys.argv[1], "w"), indent=0, sort_keys=True)
print(len(out))
