package resolve

// Options returns the options the Resolver was made with.
func (r *Resolver) Options() Options { return r.opts }
