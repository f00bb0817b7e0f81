/* Link-time stand-in for a libibverbs.so.1 of private ABI 33: gives the
 * pabi33 fake provider a versioned reference that no real library offers. */
struct verbs_device_ops;
void verbs_register_driver_33(const struct verbs_device_ops *ops) { (void)ops; }
