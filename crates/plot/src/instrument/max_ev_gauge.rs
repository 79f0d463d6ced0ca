//! Cockpit's `max_ev_gauge`: the Hessian's largest eigenvalue (HessMaxEV) on a log axis.

super::base::scatter_gauge!("Max Eigenvalue", max_ev, "max eigenvalue", true);
