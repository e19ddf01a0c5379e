/// The state machine behind `SessionTask.state`: a pure value, so every transition and the
/// action it asks for can be tested without a network.
///
/// ```
///  created ──resume──► running ◄──resume── suspended
///     │                  │  └───suspend──────►  │
///     │cancel            │cancel                │cancel
///     ▼                  ▼                      ▼
///  canceling ◄───────────┴──────────────────────┘
///     │ complete (also from running/suspended: the transfer finished)
///     ▼
///  completed
/// ```
struct TaskLifecycle: Sendable, Equatable {
    enum Phase: Sendable, Equatable {
        /// Never resumed; nothing is on the wire.
        case created
        case running
        /// Suspended after it had started: the transfer is paused in curl.
        case suspended
        case canceling
        case completed
    }

    enum ResumeAction: Equatable { case start, unpause, none }
    enum SuspendAction: Equatable { case pause, none }
    enum CancelAction: Equatable {
        /// Remove the running transfer from curl and complete with the cancel error.
        case cancelTransfer
        /// Nothing was started: complete with the cancel error right away.
        case completeWithoutTransfer
        case none
    }

    private(set) var phase: Phase = .created

    /// The public face of the phase.
    var state: SessionTask.State {
        switch phase {
        case .created, .suspended: return .suspended
        case .running: return .running
        case .canceling: return .canceling
        case .completed: return .completed
        }
    }

    mutating func resume() -> ResumeAction {
        switch phase {
        case .created:
            phase = .running
            return .start
        case .suspended:
            phase = .running
            return .unpause
        case .running, .canceling, .completed:
            return .none
        }
    }

    mutating func suspend() -> SuspendAction {
        switch phase {
        case .running:
            phase = .suspended
            return .pause
        case .created, .suspended, .canceling, .completed:
            return .none
        }
    }

    mutating func cancel() -> CancelAction {
        switch phase {
        case .created:
            phase = .canceling
            return .completeWithoutTransfer
        case .running, .suspended:
            phase = .canceling
            return .cancelTransfer
        case .canceling, .completed:
            return .none
        }
    }

    /// Returns false when the task had already completed: completion happens exactly once.
    mutating func complete() -> Bool {
        guard phase != .completed else { return false }
        phase = .completed
        return true
    }
}
