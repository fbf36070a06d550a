"""What-if analysis (What-if paper §3): replay a job's operators under the timing rules with other
durations, and attribute what the job pays for its stragglers to ranks and operator types.

Neutral ground: both detection (``sleuth.stream.detection.counterfactual``) and the localizer
import it; it imports neither, nor the emulator.
"""
