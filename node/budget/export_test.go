package budget

// QueuedGrants returns how many lease requests wait for a batch.
func (m *Manager) QueuedGrants() int {
	m.batcher.mu.Lock()
	defer m.batcher.mu.Unlock()
	return len(m.batcher.queue)
}
