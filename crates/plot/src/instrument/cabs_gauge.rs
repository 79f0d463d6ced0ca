//! Cockpit's `cabs_gauge`: the batch size CABS suggests.

super::base::scatter_gauge!("CABS", cabs, "batch size", false);
