/// `concurrency` Swift tasks, each sending its next request when its last one returned, until
/// `count` were sent: how the async clients (`ahc`, `curlew-async`) keep requests in flight.
enum TaskLoop {
    /// What one request came to: its status and body size, or the error it threw.
    struct Answer: Sendable {
        let status: Int
        let bytes: Int
    }

    static func run(
        count: Int, concurrency: Int, send: @escaping @Sendable () async throws -> Answer
    ) async -> Outcome {
        let tickets = Counter()
        return await withTaskGroup(of: Outcome.self) { group in
            for _ in 0..<min(concurrency, count) {
                group.addTask {
                    var outcome = Outcome()
                    while tickets.next() < count {
                        do {
                            let answer = try await send()
                            if (200..<300).contains(answer.status) {
                                outcome.completed += 1
                                outcome.bytes += Int64(answer.bytes)
                            } else {
                                outcome.fail("HTTP \(answer.status)")
                            }
                        } catch {
                            outcome.fail("\(error)")
                        }
                    }
                    return outcome
                }
            }
            var total = Outcome()
            for await partial in group { total.merge(partial) }
            return total
        }
    }
}
