//! Cockpit's `early_stopping_gauge`: the evidence-based early-stopping criterion (stop when positive).

super::base::scatter_gauge!("Early Stopping", early_stopping, "criterion", false);
