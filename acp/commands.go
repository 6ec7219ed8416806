package acp

// ready tells the client what a session offers once it is open: its
// slash commands.
func (as *acpSession) ready() {}
