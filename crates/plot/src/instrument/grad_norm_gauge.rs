//! Cockpit's `grad_norm_gauge`: the root-sum-of-squares of the layer-wise gradient norms, points plus moving average.

super::base::scatter_gauge!("Gradient Norm", grad_norm, "gradient norm", false);
